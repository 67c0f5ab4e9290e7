package io.longsieve.cuda.kernels;

import io.longsieve.cuda.driver.Launcher;
import jcuda.driver.CUdeviceptr;

/**
 * Launch wrappers of TokenSelect's kernels (src/main/cuda/tokenselect.cu, ts_topk.cu), shapes in the parameter
 * names; asynchronous on the stream of the {@link Kernels} they share a launcher with. Every kernel
 * after {@link #cacheCheck} (or {@link #decodeFront}) takes the device hit flag and does nothing
 * when it is set. Illegal shapes (head size, group size) throw IllegalArgumentException before anything is queued.
 *
 * <p>A captured decode step (cuda/DecodeStep) replays the launches of the step it was captured from,
 * while each step attends one slot more: the kernels that take a {@code step} pointer then read the
 * sizes that move ({@link #STEP_END}, ...; common/step_sizes.cuh) from there, and their int parameters
 * only fix what the graph bakes in (grids, buffers). Null: the int parameters are the step's.
 */
public final class SelectKernels {

  static final int SCORE_THREADS = 128;   // TSS_WARPS * 32 in ts_score.cu (launch bounds: 4 blocks per SM)
  static final int TOPK_THREADS = 256;    // TK_THREADS in ts_topk_block.cuh
  static final int TOPK_MAX_BLOCKS = 64;  // TK_MAXG in ts_topk.cuh: blocks per list at most
  static final int TOPK_MIN_SLICE = 4096; // candidates per top-k block at least: one tile of TK_E * TK_THREADS
  static final int TOPK_BINS = 2048;      // TK_BINS in ts_topk.cuh: the first digit's histogram
  static final int TOPK_WS = 3 * TOPK_BINS + 32 + 2 * TOPK_MAX_BLOCKS; // TK_WS in ts_topk.cuh: u32 per list
  static final int TOPK_CAP = 8192;       // TK_CAP in ts_topk.cu: a bin of at most this many keys is refined per block
  static final int MAX_GROUP = 8;   // TSS_GMAX in ts_score.cu: rows 0..7 (hi) and 8..15 (lo) of the mma tile

  /** A step plan's ints (common/step_sizes.cuh): slots seen, candidates, top-k input length, real position. */
  public static final int STEP_END = 0, STEP_CANDS = 1, STEP_N = 2, STEP_POS = 3, STEP_INTS = 4;

  private final Launcher l;
  private final int smCount;

  public SelectKernels(Kernels k) {
    this.l = k.launcher();
    this.smCount = k.smCount();
  }

  /** Candidates per scoring block and block count along the candidates (grid (nKv, splits)). */
  public record ScorePlan(int chunk, int splits) {}

  /**
   * About four scoring blocks per multiprocessor (what ts_score's launch bounds let reside: one
   * wave), chunks a multiple of 64 candidates.
   */
  public static ScorePlan scorePlan(int cands, int nKv, int sms) {
    int target = Math.max(1, (4 * sms + nKv - 1) / nKv);
    int chunk = (int) Math.max(64, ((long) (cands + target - 1) / target + 63) / 64 * 64);
    return new ScorePlan(chunk, Math.max(1, (cands + chunk - 1) / chunk));
  }

  public ScorePlan plan(int cands, int nKv) {
    return scorePlan(cands, nKv, smCount);
  }

  public static void checkShape(int headDim, int heads, int nKv) {
    if (headDim != 16 && headDim != 32 && headDim != 64 && headDim != 128 && headDim != 256) {
      throw new IllegalArgumentException("TokenSelect scoring takes head size 16/32/64/128/256, not " + headDim);
    }
    if (heads % nKv != 0 || heads / nKv > MAX_GROUP || heads > 256) {
      throw new IllegalArgumentException("TokenSelect scoring takes <= " + MAX_GROUP + " query heads per KV head and "
          + "<= 256 heads, not " + heads + "/" + nKv);
    }
  }

  /** cos, sin (positions, half) f32 = RoPE of positions pos0 .. pos0 + positions - 1. */
  public void ropeTable(CUdeviceptr cos, CUdeviceptr sin, CUdeviceptr invFreq, int pos0, int positions, int half) {
    l.launch("ts_rope_table", positions, 1, 1, Math.max(32, Math.min(256, (half + 31) / 32 * 32)), 0, cos, sin, invFreq,
        pos0, half);
  }

  /**
   * qf (heads, d) f32 = mean over the m rows of qPre (rows of qStride f32) rotated with rows
   * 0 .. m-1 of cos, sin (>= m, d / 2) f32.
   */
  public void fingerprint(CUdeviceptr qf, CUdeviceptr qPre, int qStride, int m, int heads, int d, CUdeviceptr cos,
                   CUdeviceptr sin) {
    l.launch("ts_fingerprint", heads, (d / 2 + 31) / 32, 1, 256, 0, qf, qPre, qStride, m, heads, d, cos, sin);
  }

  /**
   * score=rope: qs (heads, d) f32 = mean over the m rows of qPre (rows of qStride f32, before RoPE)
   * each rotated at its real position pos0 + i in fp32 (invFreq (d / 2) f32, model/Rope's angles):
   * the query CPU TokenSelect.realPositionQuery forms. Not gated by the hit flag (always written).
   */
  public void realQuery(CUdeviceptr qs, CUdeviceptr qPre, int qStride, int m, int heads, int d, CUdeviceptr invFreq,
                 int pos0) {
    l.launch("ts_real_query", heads, (d / 2 + 31) / 32, 1, 256, 0, qs, qPre, qStride, m, heads, d, invFreq, pos0);
  }

  /**
   * hit (1) int = possible && cosine(qf, cachedQf) >= threshold; hits (1) u64 += hit; on a miss
   * with store, cachedQf (n) f32 = qf (n) f32.
   */
  public void cacheCheck(CUdeviceptr hit, CUdeviceptr hits, CUdeviceptr cachedQf, CUdeviceptr qf, int n, boolean possible,
                  boolean store, double threshold) {
    l.launch("ts_cache_check", 1, 1, 1, FRONT_THREADS, 0, hit, hits, cachedQf, qf, n, possible ? 1 : 0, store ? 1 : 0,
        threshold);
  }

  /**
   * TSF_THREADS in tokenselect.cu: the block of ts_decode_front and of ts_cache_check, whose reductions then sum
   * the same elements in the same order (the decode and the multi-row paths decide alike).
   */
  static final int FRONT_THREADS = 512;

  /**
   * One decode row in ONE launch (ts_decode_front): {@link #fingerprint} with m = 1 (qPre: heads * d
   * f32, fpCos/fpSin row 0), {@link #cacheCheck} of it against cachedQf (heads * d) f32, and, when
   * qRot is non-null, qRot (heads, d) bf16 = qPre rotated at qPos with row qPos of listCos/listSin
   * (&gt;= qPos + 1, d / 2) f32 from ListKernels.ropeTable (as Kernels.rope at pos0 = qPos). With
   * qRot null the tables are not read (may be null). No score=rope query (see the overload).
   */
  public void decodeFront(CUdeviceptr qf, CUdeviceptr hit, CUdeviceptr hits, CUdeviceptr cachedQf, CUdeviceptr qRot,
                   CUdeviceptr qPre, CUdeviceptr fpCos, CUdeviceptr fpSin, CUdeviceptr listCos, CUdeviceptr listSin,
                   int heads, int d, int qPos, boolean possible, boolean store, double threshold) {
    decodeFront(qf, hit, hits, cachedQf, qRot, qPre, fpCos, fpSin, listCos, listSin, heads, d, qPos, possible, store,
        threshold, null, null, 0, null);
  }

  /**
   * As above, and when qs is non-null (score=rope) also qs (heads, d) f32 = qPre rotated at its real
   * position sPos in fp32 with invFreq (d / 2) f32 ({@link #realQuery} with m = 1), in the same
   * launch. A non-null qs with a null invFreq, sPos &lt; 0 or d &gt; 256 throws IllegalArgumentException.
   * A non-null step takes sPos from the step plan's {@link #STEP_POS}.
   */
  public void decodeFront(CUdeviceptr qf, CUdeviceptr hit, CUdeviceptr hits, CUdeviceptr cachedQf, CUdeviceptr qRot,
                   CUdeviceptr qPre, CUdeviceptr fpCos, CUdeviceptr fpSin, CUdeviceptr listCos, CUdeviceptr listSin,
                   int heads, int d, int qPos, boolean possible, boolean store, double threshold, CUdeviceptr qs,
                   CUdeviceptr invFreq, int sPos, CUdeviceptr step) {
    if (qRot != null && (listCos == null || listSin == null || qPos < 0)) {
      throw new IllegalArgumentException("a rotated query needs the list-index tables and qPos >= 0, not " + qPos);
    }
    if (qs != null && (invFreq == null || sPos < 0 || d > 256)) {  // the kernel stages <= 128 angles
      throw new IllegalArgumentException("a real-position query needs the inverse frequencies, sPos >= 0 and head size"
          + " <= 256, not " + sPos + ", " + d);
    }
    l.launch("ts_decode_front", 1, 1, 1, FRONT_THREADS, 0, qf, hit, hits, cachedQf, qRot, qPre, fpCos, fpSin,
        qRot == null ? null : listCos, qRot == null ? null : listSin, heads, d, qPos, possible ? 1 : 0, store ? 1 : 0,
        threshold, qs, qs == null ? null : invFreq, qs == null ? 0 : sPos, step);
  }

  /**
   * logits (heads, cands) f32 = voteScale * qf_h . kPre[sinks + c] of KV head h's scoring head,
   * partMl (heads, plan.splits, 2) f32 per-split softmax (max, sum); ts_score.cu. The page size must
   * be a power of two (Kernels.PAGE_SIZE is).
   */
  public void score(CUdeviceptr logits, CUdeviceptr partMl, CUdeviceptr hit, Kernels.KvView kv, CUdeviceptr qf, int heads,
             int sinks, int cands, ScorePlan p, boolean gqaMod, float voteScale) {
    score(logits, partMl, hit, kv, qf, heads, sinks, cands, p, gqaMod, voteScale, false, null);
  }

  /** As below without a step plan. */
  public void score(CUdeviceptr logits, CUdeviceptr partMl, CUdeviceptr hit, Kernels.KvView kv, CUdeviceptr qf, int heads,
             int sinks, int cands, ScorePlan p, boolean gqaMod, float voteScale, boolean rotated) {
    score(logits, partMl, hit, kv, qf, heads, sinks, cands, p, gqaMod, voteScale, rotated, null);
  }

  /**
   * As above; rotated (score=rope) reads kv's kRope (the keys rotated at their original positions,
   * same paged layout) instead of kPre, with qf then the real-position query of {@link #realQuery}. A
   * non-null step takes cands from the step plan's {@link #STEP_CANDS} (plan p still from the host's).
   */
  public void score(CUdeviceptr logits, CUdeviceptr partMl, CUdeviceptr hit, Kernels.KvView kv, CUdeviceptr qf, int heads,
             int sinks, int cands, ScorePlan p, boolean gqaMod, float voteScale, boolean rotated, CUdeviceptr step) {
    checkShape(kv.headDim(), heads, kv.nKv());
    if (Integer.bitCount(kv.pageSize()) != 1) {
      throw new IllegalArgumentException("TokenSelect scoring takes a power-of-two page size, not " + kv.pageSize());
    }
    l.launch("ts_score_d" + kv.headDim(), kv.nKv(), p.splits(), 1, SCORE_THREADS, 0, logits, partMl, hit,
        rotated ? kv.kRope() : kv.kPre(),
        kv.pageTable(), qf, heads, kv.nKv(), kv.pageSize(), sinks, cands, p.chunk(), gqaMod ? 1 : 0, voteScale, step);
  }

  /** As {@link #score} from the int4 copy: kq (slots, nKv, d / 2) packed, ks (slots, nKv) f32; ts_score_int4.cu. */
  public void scoreInt4(CUdeviceptr logits, CUdeviceptr partMl, CUdeviceptr hit, CUdeviceptr kq, CUdeviceptr ks, CUdeviceptr qf,
                 int heads, int nKv, int d, int sinks, int cands, ScorePlan p, boolean gqaMod, float voteScale) {
    scoreInt4(logits, partMl, hit, kq, ks, qf, heads, nKv, d, sinks, cands, p, gqaMod, voteScale, null);
  }

  /** As above; a non-null step takes cands from the step plan. */
  public void scoreInt4(CUdeviceptr logits, CUdeviceptr partMl, CUdeviceptr hit, CUdeviceptr kq, CUdeviceptr ks, CUdeviceptr qf,
                 int heads, int nKv, int d, int sinks, int cands, ScorePlan p, boolean gqaMod, float voteScale,
                 CUdeviceptr step) {
    checkShape(d, heads, nKv);
    l.launch("ts_score_int4_d" + d, nKv, p.splits(), 1, SCORE_THREADS, 0, logits, partMl, hit, kq, ks, qf, heads, nKv,
        sinks, cands, p.chunk(), gqaMod ? 1 : 0, voteScale, step);
  }

  /**
   * votes (perKv ? nKv : 1, cands) f32 = summed per-head softmax of logits (heads, cands). With topKWs
   * non-null (a {@link #topKLists} workspace of &gt;= that many lists) ts_votes also adds each list's
   * histogram of the votes' first radix digit into it, which the next {@link #topKLists} on these
   * votes must consume with {@code prebuilt} (it leaves the workspace zero again); a histogram
   * nobody consumes corrupts the workspace's next top-k. A set hit flag writes nothing, but logits
   * and partMl are still read (their loads overlap the flag's): they must be allocated at full size.
   */
  public void votes(CUdeviceptr votes, CUdeviceptr topKWs, CUdeviceptr logits, CUdeviceptr partMl, CUdeviceptr hit, int heads,
             int nKv, int cands, int splits, boolean perKv, boolean gqaMod) {
    votes(votes, topKWs, logits, partMl, hit, heads, nKv, cands, splits, perKv, gqaMod, null);
  }

  /** As above; a non-null step takes cands from the step plan (the grid stays {@link #voteBlocks} of the host's). */
  public void votes(CUdeviceptr votes, CUdeviceptr topKWs, CUdeviceptr logits, CUdeviceptr partMl, CUdeviceptr hit, int heads,
             int nKv, int cands, int splits, boolean perKv, boolean gqaMod, CUdeviceptr step) {
    l.launch("ts_votes", voteBlocks(cands, smCount), 1, 1, VOTE_THREADS, 0, votes, topKWs, logits, partMl, hit, TOPK_WS,
        heads, nKv, cands, splits, perKv ? 1 : 0, gqaMod ? 1 : 0, step);
  }

  static final int VOTE_THREADS = 256;  // ts_votes merges 8 lanes per head: a multiple of 8 (and 32)

  /**
   * Blocks of ts_votes: one candidate per thread up to four blocks per multiprocessor (enough
   * loads in flight), then grid-stride; each block first merges every head's split statistics.
   */
  public static int voteBlocks(int cands, int sms) {
    return Math.max(1, Math.min(4 * sms, (cands + VOTE_THREADS - 1) / VOTE_THREADS));
  }

  /** Length of max_pool1d's output with padding (kernel - 1) / 2: one short of n for an even kernel. */
  public static int pooledLength(int n, int kernel) {
    int pad = (kernel - 1) / 2;
    return n + 2 * pad - kernel + 1;
  }

  /** pooled (lists, pooledLength) f32 = max_pool1d of each row of votes (lists, n); returns the length. */
  public int maxPool(CUdeviceptr pooled, CUdeviceptr votes, CUdeviceptr hit, int lists, int n, int kernel) {
    return maxPool(pooled, votes, hit, lists, n, kernel, null);
  }

  /** As above; a non-null step takes n from the step plan's {@link #STEP_CANDS} and the length from its {@link #STEP_N}. */
  public int maxPool(CUdeviceptr pooled, CUdeviceptr votes, CUdeviceptr hit, int lists, int n, int kernel,
                     CUdeviceptr step) {
    int len = pooledLength(n, kernel);
    l.launch("ts_maxpool", poolBlocks(len), lists, 1, 256, 0, pooled, votes, hit, n, len, kernel, step);
    return len;
  }

  /** Blocks per list of ts_maxpool for a pooled length (grid-stride beyond). */
  public static int poolBlocks(int len) {
    return Math.max(1, Math.min(4096, (len + 255) / 256));
  }

  /** Bytes of ts_topk_lists' workspace for nLists lists; allocate once, zero-filled (the kernel leaves it zero). */
  public static long topKWorkspaceBytes(int nLists) {
    return (long) nLists * TOPK_WS * 4;
  }

  /** Bytes of ts_topk_lists' candidate scratch for nLists rows of n values (any contents). */
  public static long topKCandidateBytes(int nLists, int n) {
    return Math.max(4L, (long) nLists * n * 4);
  }

  /**
   * Blocks per list of ts_topk_lists: all G * lists blocks must be resident at once (the kernel's
   * grid barrier spins), so G * lists &lt;= sms; at most TOPK_MAX_BLOCKS, and no more than slices
   * of TOPK_MIN_SLICE candidates need. Lists &gt; sms: G = 1, where the barrier never waits.
   */
  public static int topKBlocks(int n, int nLists, int sms) {
    int g = Math.min(TOPK_MAX_BLOCKS, Math.max(1, sms / Math.max(1, nLists)));
    return Math.max(1, Math.min(g, (n + TOPK_MIN_SLICE - 1) / TOPK_MIN_SLICE));
  }

  /**
   * Whether a top-k of count from n values takes its first histogram from ts_votes: only a real
   * selection (0 &lt; count &lt; n; the other paths never read the histogram, so they could not
   * clear it) straight on the votes (no max-pool).
   */
  public static boolean histogramInVotes(int count, int n, int pool) {
    return pool <= 1 && count > 0 && count < n;
  }

  /**
   * top (lists, count) int = sinks + ascending indices of the count largest of each row of vals
   * (lists, n) f32, ties to the lower index (count &gt;= n: every index, the last repeated, as the
   * CPU pads), and lists (lists, sinks + count + local) int = [0, sinks) ++ top ++ [end - local, end).
   * ONE launch (ts_topk.cu), {@link #topKBlocks} blocks per list synchronised by a grid barrier in
   * ws ({@link #topKWorkspaceBytes}(&gt;= nLists), zero-filled at allocation, left zero; one call at a
   * time per workspace, and no other work on the GPU that could keep those blocks from being
   * resident together); cand ({@link #topKCandidateBytes}(nLists, n)) scratch. prebuilt: the
   * preceding {@link #votes} with this ws built the first histogram (one grid barrier less: one in
   * all when the first digit's bin holds at most TOPK_CAP keys); requires {@link #histogramInVotes}. When the hit flag is set top already holds the
   * cached top-k and is only copied into the lists; count == 0 builds the lists without reading vals
   * or cand (which may then be null); otherwise vals is read even on a hit (with the flag), so it must
   * be allocated at full size. Bad counts or a prebuilt call outside 0 &lt; count &lt; n throw
   * IllegalArgumentException before anything is queued.
   */
  public void topKLists(CUdeviceptr top, CUdeviceptr lists, CUdeviceptr vals, CUdeviceptr hit, CUdeviceptr ws, CUdeviceptr cand,
                 int nLists, int n, int count, int sinks, int local, int end, boolean prebuilt) {
    topKLists(top, lists, vals, hit, ws, cand, nLists, n, count, sinks, local, end, prebuilt, null);
  }

  /**
   * As above; a non-null step takes n and end from the step plan's {@link #STEP_N} and {@link #STEP_END}
   * (grid and prebuilt from the host's: the same as long as the step's n keeps them).
   */
  public void topKLists(CUdeviceptr top, CUdeviceptr lists, CUdeviceptr vals, CUdeviceptr hit, CUdeviceptr ws, CUdeviceptr cand,
                 int nLists, int n, int count, int sinks, int local, int end, boolean prebuilt, CUdeviceptr step) {
    if (count < 0 || n < 0 || nLists < 1) {
      throw new IllegalArgumentException("top-k of " + count + " from " + nLists + " x " + n);
    }
    if (prebuilt && !histogramInVotes(count, n, 1)) {
      throw new IllegalArgumentException("a histogram from the votes is only consumed by a top-k of 0 < " + count
          + " < " + n);
    }
    l.launch("ts_topk_lists", topKBlocks(n, nLists, smCount), nLists, 1, TOPK_THREADS, 0, top, lists, vals, hit, ws,
        cand, n, count, sinks, local, end, prebuilt ? 1 : 0, step);
  }

  /** Quantises slots slot0 .. slot0 + n - 1 of kv's kPre into kq (slots, nKv, d / 2) and ks (slots, nKv). */
  public void quantise(CUdeviceptr kq, CUdeviceptr ks, Kernels.KvView kv, int slot0, int n) {
    if (n <= 0) return;
    int threads = Math.max(32, (kv.headDim() / 2 + 31) / 32 * 32);
    l.launch("ts_quantise", n, kv.nKv(), 1, threads, 0, kq, ks, kv.kPre(), kv.pageTable(), kv.nKv(), kv.headDim(),
        kv.pageSize(), slot0);
  }
}
