package io.longsieve.cuda.kernels;

import io.longsieve.cuda.driver.Launcher;
import jcuda.driver.CUdeviceptr;

/**
 * Typed launches of the KV compression kernels (src/main/cuda/kv_compress.cu), shapes in the
 * parameter names; everything asynchronous on the dense kernels' stream. CPU twins:
 * cpu/policy/ObservationWindow, SelKv, SelKvMerge, SnapKv, TopK and cpu/kernels/KvCache.retain. Failure semantics:
 * IllegalArgumentException for shapes the kernels do not take, before anything is queued.
 */
public final class KvCompressKernels {

  private static final int T = 64;  // tile of kvc_obs_scores (KVC_T)

  private final Launcher l;

  public KvCompressKernels(Kernels k) {
    this.l = k.launcher();
  }

  private static int blocks(long threads, int block) {
    long b = (threads + block - 1) / block;
    if (b > Integer.MAX_VALUE) throw new IllegalArgumentException("grid too large: " + b);
    return (int) Math.max(1, b);
  }

  /** ring (w, qDim) f32 rows (start + i) % w = qPre rows from + i (stride f32), i &lt; nRows. */
  public void obsStore(CUdeviceptr ring, CUdeviceptr qPre, int stride, int from, int nRows, int start, int w, int qDim) {
    if (nRows <= 0) return;
    l.launch("kvc_obs_store", nRows, 1, 1, 256, 0, ring, qPre, stride, from, start, w, qDim);
  }

  /** qr (heads, cnt, d) f32 = ring rows (head0 + r) % w rotated at posLast - (cnt - 1 - r). */
  public void obsRope(CUdeviceptr qr, CUdeviceptr ring, int head0, int w, int cnt, int heads, int d, CUdeviceptr invFreq,
               int posLast) {
    l.launch("kvc_obs_rope", cnt, 1, 1, 256, 0, qr, ring, head0, w, cnt, heads, d, invFreq, posLast);
  }

  /** Key tiles of the observation attention (the partial stats hold rows x this many pairs). */
  public static int obsTiles(int n) {
    return (n + T - 1) / T;
  }

  /**
   * attn (heads, n) f32 = Σ over the cnt window rows of softmax(qr · kRope · scale + bias), row r at
   * slot n − cnt + r (causal). attn is zeroed here; partial (heads·cnt, obsTiles(n), 2) and stats
   * (heads·cnt, 2) f32 are scratch.
   */
  public void obsAttention(CUdeviceptr attn, CUdeviceptr partial, CUdeviceptr stats, CUdeviceptr qr, Kernels.KvView kv,
                    int n, int cnt, int heads, float scale, Kernels k) {
    int g = heads / kv.nKv();
    if (g > 16) throw new IllegalArgumentException("at most 16 query heads per KV head, not " + g);
    int rowTiles = (g * cnt + T - 1) / T, tiles = obsTiles(n);
    k.fillF32(attn, (long) heads * n, 0f);
    for (int pass = 0; pass < 2; pass++) {
      l.launch("kvc_obs_scores", tiles, rowTiles, kv.nKv(), 256, 0, pass, partial, stats, attn, qr, kv.kRope(),
          kv.pageTable(), kv.bias(), n, cnt, heads, kv.nKv(), kv.headDim(), kv.pageSize(), scale);
      if (pass == 0) l.launch("kvc_obs_stats", blocks((long) heads * cnt * 32, 256), 1, 1, 256, 0, stats, partial,
          heads * cnt, tiles);
    }
  }

  /** vnorm (nKv, n) f32 = ‖v_j‖₁ per KV head. */
  public void vnorm(CUdeviceptr vnorm, Kernels.KvView kv, int n) {
    l.launch("kvc_vnorm", blocks((long) kv.nKv() * n * 32, 256), 1, 1, 256, 0, vnorm, kv.v(), kv.pageTable(), n,
        kv.nKv(), kv.headDim(), kv.pageSize());
  }

  /** out (heads, len) = attn[h, off + j] · vnorm[h / group, off + j]. */
  public void mulSlice(CUdeviceptr out, CUdeviceptr attn, CUdeviceptr vnorm, int n, int off, int len, int heads, int group) {
    l.launch("kvc_mul_slice", blocks((long) heads * len, 256), 1, 1, 256, 0, out, attn, vnorm, n, off, len, heads, group);
  }

  /** dst (rows, n) = avg_pool1d(src (rows, n), kernel, padding kernel / 2), as TokenSparseAttention.avgPool. */
  public void avgPool(CUdeviceptr dst, CUdeviceptr src, int rows, int n, int kernel) {
    l.launch("kvc_avg_pool", blocks((long) rows * n, 256), 1, 1, 256, 0, dst, src, rows, n, kernel);
  }

  /** dst (nKv, len) = Σ over the group's heads of src rows (leading dimension ld). */
  public void groupSum(CUdeviceptr dst, CUdeviceptr src, int ld, int len, int nKv, int group) {
    l.launch("kvc_group_sum", blocks((long) nKv * len, 256), 1, 1, 256, 0, dst, src, ld, len, nKv, group);
  }

  /** sum (nKv, len) = −∞ where no head of the group flagged the slot in flags (heads, len) u8. */
  public void unionMask(CUdeviceptr sum, CUdeviceptr flags, int len, int nKv, int group) {
    l.launch("kvc_union_mask", blocks((long) nKv * len, 256), 1, 1, 256, 0, sum, flags, len, nKv, group);
  }

  /** flags (rows, flagLd) u8 = 1 for the k largest of each score row (rows, ld), j &lt; n; ties to the lower index. */
  public void topkFlags(CUdeviceptr flags, int flagLd, CUdeviceptr score, int ld, int rows, int n, int k) {
    l.launch("kvc_topk_flags", rows, 1, 1, 1024, 0, flags, flagLd, score, ld, n, k);
  }

  /**
   * keep (nKv, keepLd) and drop (nKv, dropLd) int (drop may be null), ascending per KV head: slots
   * below lo and from hi on are kept, slot lo + j when flags[g, j]; counts (nKv, 2) int = (kept, dropped).
   */
  public void lists(CUdeviceptr keep, int keepLd, CUdeviceptr drop, int dropLd, CUdeviceptr counts, CUdeviceptr flags,
             int flagLd, int nKv, int n, int lo, int hi) {
    l.launch("kvc_lists", nKv, 1, 1, 1024, 0, keep, keepLd, drop, dropLd, counts, flags, flagLd, n, lo, hi);
  }

  /**
   * SelKV routing, step 1 (kv_merge.cu): runBest (nKv, keepLd) int = for each selected token j in [from, to)
   * of keep (nKv, keepLd), the most attended selected token of its position bucket (mass (nKv, n) f32;
   * position = slot + posOffset).
   */
  public void bucketBest(CUdeviceptr runBest, CUdeviceptr keep, int keepLd, int from, int to, CUdeviceptr mass, int n,
                         int posOffset, int bucket, int nKv) {
    if (to <= from) return;
    l.launch("kvc_bucket_best", blocks(to - from, 256), nKv, 1, 256, 0, runBest, keep, keepLd, from, to, mass, n,
        posOffset, bucket);
  }

  /**
   * SelKV routing, step 2: target (nKv, nDrop) int = the index into keep of each dropped slot's
   * target (drop (nKv, nDrop) int): its bucket's runBest, else the nearest selected token; -1 when
   * nothing is selected (cpu/policy/SelKvMerge.targets).
   */
  public void route(CUdeviceptr target, CUdeviceptr drop, int nDrop, CUdeviceptr keep, int keepLd, int from, int to,
                    CUdeviceptr runBest, int posOffset, int bucket, int nKv) {
    if (nDrop <= 0) return;
    l.launch("kvc_route", blocks(nDrop, 256), nKv, 1, 256, 0, target, drop, nDrop, keep, keepLd, from, to, runBest,
        posOffset, bucket);
  }

  /**
   * The value-cosine gate and the accumulation of every routed dropped slot into its target:
   * weight (nKv, keepLd), vAcc and kAcc (nKv, keepLd, d), headMass (nKv, keepLd, group) f32,
   * zeroed by the caller (kAcc null unless merge=kv). attn (heads, n), mass (nKv, n) f32.
   */
  public void mergeAcc(CUdeviceptr weight, CUdeviceptr vAcc, CUdeviceptr kAcc, CUdeviceptr headMass, CUdeviceptr target,
                       CUdeviceptr drop, int nDrop, CUdeviceptr keep, int keepLd, CUdeviceptr attn, CUdeviceptr mass,
                       Kernels.KvView kv, int n, int group) {
    if (nDrop <= 0) return;
    if (group > 32) throw new IllegalArgumentException("at most 32 query heads per KV head, not " + group);
    l.launch("kvc_merge_acc", blocks((long) kv.nKv() * nDrop * 32, 256), 1, 1, 256, 0, weight, vAcc, kAcc, headMass,
        target, drop, nDrop, keep, keepLd, attn, mass, kv.kPre(), kv.v(), kv.pageTable(), n, kv.nKv(), group,
        kv.headDim(), kv.pageSize());
  }

  /**
   * Writes the merged values (keys) of the selected tokens keep[g, from .. to), and adds α · log R_{h,t}
   * per query head to kv's bias (slots, nKv · group), which must exist.
   */
  public void mergeApply(Kernels.KvView kv, CUdeviceptr weight, CUdeviceptr vAcc, CUdeviceptr kAcc, CUdeviceptr headMass,
                         CUdeviceptr keep, int keepLd, int from, int to, CUdeviceptr attn, CUdeviceptr mass,
                         CUdeviceptr invFreq, int posOffset, int n, int group, double alpha) {
    if (to <= from) return;
    l.launch("kvc_merge_apply", to - from, kv.nKv(), 1, 64, 0, kv.kPre(), kv.kRope(), kv.v(), kv.bias(), weight, vAcc,
        kAcc, headMass, keep, keepLd, from, attn, mass, kv.pageTable(), invFreq, posOffset, n, kv.nKv(), group,
        kv.headDim(), kv.pageSize(), alpha);
  }

  /** Scratch bytes compaction of `rows` destination slots needs (keys twice, values, the bias of every query head). */
  public static long compactScratchBytes(int rows, int nKv, int nHeads, int d) {
    return 3L * nKv * rows * d * 2 + (long) rows * nHeads * 4;
  }

  /**
   * Compaction: destination slots first .. count − 1 of every KV head take the source slot
   * keep[g, i] (keep (nKv, keepLd) int ascending), or, with keep null, slot i + 1 from dropSlot on
   * (one slot evicted); keys (both), values and the bias of the KV head's query heads (bias (slots,
   * nHeads)) move through scratch; the bias of slots count .. oldLength − 1 is zeroed, as
   * KvCache.retain leaves it.
   */
  public void compact(Kernels.KvView kv, int nHeads, CUdeviceptr scratch, CUdeviceptr keep, int keepLd, int dropSlot,
               int first, int count, int oldLength) {
    int d = kv.headDim();
    if (d % 8 != 0) throw new IllegalArgumentException("headDim " + d + " must be a multiple of 8");
    int rows = count - first;
    if (rows > 0) {
      int threads = Math.max(32, Math.min(256, d / 8));
      l.launch("kvc_gather", rows, kv.nKv(), 1, threads, 0, scratch, kv.kPre(), kv.kRope(), kv.v(), kv.bias(),
          kv.pageTable(), keep, keepLd, dropSlot, first, count, kv.nKv(), nHeads, d, kv.pageSize());
      l.launch("kvc_scatter", rows, kv.nKv(), 1, threads, 0, scratch, kv.kPre(), kv.kRope(), kv.v(), kv.bias(),
          kv.pageTable(), first, count, kv.nKv(), nHeads, d, kv.pageSize());
    }
    if (kv.bias() != null && oldLength > count) {
      l.launch("kvc_zero_bias", blocks((long) (oldLength - count) * nHeads, 256), 1, 1, 256, 0, kv.bias(), count,
          oldLength, nHeads);
    }
  }
}
