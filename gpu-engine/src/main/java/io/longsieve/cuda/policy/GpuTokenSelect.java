package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.ListKernels;
import io.longsieve.cuda.kernels.SelectKernels;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import io.longsieve.policy.TokenSelectParams;
import java.util.Arrays;
import jcuda.driver.CUdeviceptr;

/**
 * TokenSelect on the GPU, the twin of cpu/policy/TokenSelect (same options, same statistics; read
 * its Javadoc for the algorithm). Per layer and call (one decode token, or one prefill sub-chunk of
 * {@code chunk} rows): fingerprint, Selection Cache check on the device, scoring of the pre-RoPE
 * keys (or the part's int4 copy with {@code index=int4}) with fused softmax statistics, the soft
 * vote, optional max-pool, radix top-k and the lists sinks ++ top ++ local (one launch), attention over them
 * (ListKernels). Nothing waits for the device: the host knows every size (a cache hit needs the
 * cached top-k count to equal this call's), and a hit only makes the scoring kernels return early.
 * With {@code score=rope} the scoring reads the keys rotated at their original positions (the
 * KvView's kRope) against the mean of the block's queries rotated at their real positions (qs,
 * fp32, as the CPU's realPositionQuery); the neutral fingerprint still decides Selection Cache hits.
 * A decode step (one row) launches ts_decode_front (fingerprint, cache check, with score=rope the
 * real-position query, and, with compact positions, the query rotated at its list index),
 * ts_score*, ts_votes, [ts_maxpool], ts_topk_lists and the list attention; the int4 copy is
 * quantised only when the scored range outgrows it (once every local-window steps).
 *
 * <p>Failure semantics: {@code score=rope} with {@code index=int4} throws IllegalArgumentException
 * from the constructor (as the CPU twin); unsupported shapes (head size, more than 8 query heads
 * per KV head) throw IllegalArgumentException from the first call; CUDA errors propagate from the
 * call that queued the work; device memory grows on demand (synchronising once) and is freed on
 * close. Statistics: selection time is device time in the prefill ({@link SelectionTimer}), the host's
 * time to queue the selection in decode steps.
 */
public final class GpuTokenSelect implements GpuParts.Prefill, GpuParts.Decode {

  private final SelectionStats stats;
  private final GpuEnv env;
  private final SelectionTimer timer;
  private final SelectKernels sk;
  private final ListKernels lk;
  private final TokenSelectParams params;
  private final int heads, kvHeads, d, lists, qDim;
  private final float voteScale;

  private final int[] cachedCount;        // (layer) top-k count of the device's cached top-k; 0: none
  private final int[] indexed;            // (layer) slots in the int4 copy
  private final DeviceBuffer[] cachedTop; // (layer) → (lists, cachedCount) int cached top-k slots
  private final DeviceBuffer[] kq;        // (layer) → (slots, kvHeads, headDim / 2) packed int4 keys
  private final DeviceBuffer[] ks;        // (layer) → (slots, kvHeads) f32 int4 scales
  private final DeviceBuffer qf;          // (heads, headDim) f32 fingerprint of this call
  private final DeviceBuffer qs;          // (heads, headDim) f32 score=rope: mean query at real positions; else null
  private final DeviceBuffer cachedQf;    // (layer, heads, headDim) f32 fingerprint the cached top-k was scored with
  private final DeviceBuffer hit;         // (1) int: this call hit the Selection Cache
  private final DeviceBuffer hits;        // (1) u64 hits counted on the device
  private final DeviceBuffer topWs;       // (lists, SelectKernels.TOPK_WS) u32 top-k grid barrier and histograms, zero
  private DeviceBuffer top;               // (lists, count) int top-k when the cache is off
  private DeviceBuffer logits;            // (heads, cands) f32 vote logits
  private DeviceBuffer partMl;            // (heads, splits, 2) f32 per-split softmax (max, sum)
  private DeviceBuffer votes;             // (lists, cands) f32 soft votes
  private DeviceBuffer pooled;            // (lists, cands) f32 max-pooled votes
  private DeviceBuffer cand;              // (lists, cands) u32 top-k candidate scratch
  private DeviceBuffer list;              // (lists, listLen) int slots attended
  private DeviceBuffer qRot;              // (chunk, heads, headDim) bf16 queries rotated at list index
  private DeviceBuffer ropeCos, ropeSin;  // (tablePositions, headDim / 2) f32 list-index RoPE tables
  private final DeviceBuffer fpCos, fpSin; // (chunk, headDim / 2) f32 RoPE of positions window .. window + chunk - 1
  private int tablePositions;
  private long hitsFolded;
  private int lastListLen;

  GpuTokenSelect(PolicyTerm t, SelectionStats stats, GpuEnv env) {
    this.stats = stats;
    this.env = env;
    this.timer = new SelectionTimer(env.k().stream());
    ModelConfig c = env.config();
    params = TokenSelectParams.of(t);  // refuses score=rope with index=int4, as on the CPU
    voteScale = params.voteScale(env.scale());
    heads = c.numHeads();
    kvHeads = c.numKvHeads();
    d = c.headDim();
    qDim = heads * d;
    lists = params.perKvHead() ? kvHeads : 1;
    SelectKernels.checkShape(d, heads, kvHeads);
    int layers = c.numLayers();
    cachedCount = new int[layers];
    indexed = new int[layers];
    cachedTop = new DeviceBuffer[layers];
    kq = new DeviceBuffer[layers];
    ks = new DeviceBuffer[layers];
    sk = new SelectKernels(env.k());
    CudaContext ctx = env.ctx();
    DeviceBuffer a = null, b = null, h = null, s = null, w = null, r = null;
    try {
      a = ctx.alloc((long) qDim * 4, "TokenSelect fingerprint");
      if (params.ropeScore()) r = ctx.alloc((long) qDim * 4, "TokenSelect real-position query");
      b = ctx.alloc((long) layers * qDim * 4, "TokenSelect cached fingerprints");
      b.fill32(0);
      h = ctx.alloc(4, "TokenSelect hit flag");
      h.fill32(0);
      s = ctx.alloc(8, "TokenSelect hit counter");
      s.fill32(0);
      w = ctx.alloc(SelectKernels.topKWorkspaceBytes(lists), "TokenSelect top-k workspace");
      w.fill32(0);
    } catch (RuntimeException e) {
      for (DeviceBuffer x : new DeviceBuffer[] {a, b, h, s, w, r}) if (x != null) x.close();
      throw e;
    }
    qf = a;
    qs = r;
    cachedQf = b;
    hit = h;
    hits = s;
    topWs = w;
    DeviceBuffer fc = null, fs = null;
    try {
      // the fingerprint rotates row i at window + i whatever the call: one table for the part's life
      fc = ctx.alloc((long) params.chunk() * (d / 2) * 4, "TokenSelect fingerprint cos");
      fs = ctx.alloc((long) params.chunk() * (d / 2) * 4, "TokenSelect fingerprint sin");
      sk.ropeTable(fc.ptr(), fs.ptr(), env.invFreq(), params.window(), params.chunk(), d / 2);
    } catch (RuntimeException e) {
      for (DeviceBuffer x : new DeviceBuffer[] {a, b, h, s, w, r, fc, fs}) if (x != null) x.close();
      throw e;
    }
    fpCos = fc;
    fpSin = fs;
    lk = new ListKernels(env.k(), ctx);
  }

  @Override
  public void prefill(LayerCall c) {
    if (params.int4()) index(c, c.before() + c.n());
    for (int s = 0; s < c.n(); s += params.chunk()) {
      int m = Math.min(params.chunk(), c.n() - s);
      block(c, s, m, c.before() + s + m, false);
    }
  }

  @Override
  public void decode(LayerCall c) {
    int end = c.before() + 1;
    if (params.int4()) index(c, params.block(end, 1).scoredEnd());
    block(c, 0, 1, end, true);
  }

  @Override
  public void reset() {
    Arrays.fill(cachedCount, 0);
    Arrays.fill(indexed, 0); // slots moved: the int4 copy is rebuilt on the next call
  }

  /**
   * Makes the layer's int4 copy cover slots [0, need) (what this call's scoring reads), quantising
   * every slot up to the call's last one when it launches (all slots after a reset or growth). In
   * decode the scored slots end {@code local} before the newest, so this launches once every
   * {@code local} steps rather than every step.
   */
  private void index(LayerCall c, int need) {
    int layer = c.layer(), total = c.before() + c.n();
    if (indexed[layer] > total) indexed[layer] = 0;
    if (quantiseFrom(indexed[layer], need) < 0) return;
    long bytes = (long) total * kvHeads * (d / 2);
    if (kq[layer] == null || kq[layer].bytes() < bytes) {
      int cap = int4Slots(total);
      kq[layer] = env.ctx().grow(kq[layer], (long) cap * kvHeads * (d / 2), "TokenSelect int4 keys");
      ks[layer] = env.ctx().grow(ks[layer], (long) cap * kvHeads * 4, "TokenSelect int4 scales");
      indexed[layer] = 0;
    }
    sk.quantise(kq[layer].ptr(), ks[layer].ptr(), c.kv(), indexed[layer], total - indexed[layer]);
    indexed[layer] = total;
  }

  /** Slots the int4 copy is sized for when it must hold total: a quarter more, in multiples of 64. */
  public static int int4Slots(int total) {
    return (int) Math.min(Integer.MAX_VALUE, ((long) total * 5 / 4 + 63) / 64 * 64);
  }

  /**
   * First slot to quantise so that an int4 copy holding slots [0, indexed) covers [0, need); -1 when
   * it already does (no launch).
   */
  static int quantiseFrom(int indexed, int need) {
    return indexed >= need ? -1 : indexed;
  }

  /** Rows row0 .. row0+m-1 of the call whose last row sees slots [0, end). */
  private void block(LayerCall c, int row0, int m, int end, boolean decode) {
    int layer = c.layer();
    TokenSelectParams.Block bp = params.block(end, m);
    int local = bp.local();
    CUdeviceptr out = c.out().withByteOffset((long) row0 * qDim * 2);
    if (bp.dense()) {
      env.k().attention(out, c.q().withByteOffset((long) row0 * qDim * 2), c.kv(), m, heads, end - m,
          env.config().slidingWindow(), env.scale(), env.ws());
      record(layer, m, c.pos0() + row0 + m, end, end, decode);
      return;
    }
    // prefill blocks in device time (selection_ms); decode steps by the host's clock, as the queueing time
    // profile and eval read (the stats stop at the prefill: events per decode step and layer cost too much)
    long t0 = System.nanoTime();
    CudaStream.Event e0 = decode ? null : timer.start();
    int cands = bp.cands(), count = bp.count(), listLen = bp.listLen();
    CUdeviceptr topPtr;
    boolean possible = false;
    if (params.cacheOn()) {
      stats.cacheLookups++;
      possible = cachedCount[layer] == count && cachedTop[layer] != null;
      if (!possible) {
        int room = Math.max(count, params.kFrac() > 0 ? count * 5 / 4 : params.k());
        cachedTop[layer] = env.ctx().grow(cachedTop[layer], (long) lists * room * 4, "TokenSelect cached top-k");
      }
      cachedCount[layer] = count; // a miss stores this count's top-k, a hit had it already
      topPtr = cachedTop[layer].ptr();
    } else {
      // the hit flag stays 0 from construction: only the cache-on path ever sets it
      top = env.ctx().grow(top, (long) lists * count * 4, "TokenSelect top-k");
      topPtr = top.ptr();
    }
    CUdeviceptr q = front(c, layer, row0, m, listLen, possible);
    list = env.ctx().grow(list, (long) lists * listLen * 4, "TokenSelect lists");
    if (count > 0) selectTop(c, topPtr, cands, count, local, end);
    else sk.topKLists(topPtr, list.ptr(), null, hit.ptr(), topWs.ptr(), null, lists, cands, 0, params.sinks(), local,
        end, false); // lists
    lastListLen = listLen;
    if (decode) stats.selectionNanos += System.nanoTime() - t0;
    else timer.stop(e0);
    lk.attend(out, q, c.kv(), list.ptr(), lists, listLen, m, heads, params.compact(),
        params.compact() ? ropeCos.ptr() : null,
        params.compact() ? ropeSin.ptr() : null, params.compact() ? env.invFreq() : null, env.scale());
    record(layer, m, c.pos0() + row0 + m, end, listLen, decode);
  }

  /**
   * Scoring, vote, pool, then ONE launch for the top-k into topPtr (lists, count) and the lists
   * sinks ++ top ++ local; on a hit all but the lists are skipped on the device (topPtr is cached).
   * Without pooling the vote kernel also builds the top-k's first histogram (in topWs).
   */
  private void selectTop(LayerCall c, CUdeviceptr topPtr, int cands, int count, int local, int end) {
    SelectKernels.ScorePlan p = sk.plan(cands, kvHeads);
    logits = env.ctx().grow(logits, (long) heads * cands * 4, "TokenSelect logits");
    partMl = env.ctx().grow(partMl, (long) heads * p.splits() * 2 * 4, "TokenSelect softmax partials");
    votes = env.ctx().grow(votes, (long) lists * cands * 4, "TokenSelect votes");
    if (params.int4()) {
      sk.scoreInt4(logits.ptr(), partMl.ptr(), hit.ptr(), kq[c.layer()].ptr(), ks[c.layer()].ptr(), qf.ptr(), heads,
          kvHeads, d, params.sinks(), cands, p, params.gqaMod(), voteScale);
    } else {
      // score=rope: the rotated keys (kRope) against the real-position query, the true logits
      boolean rope = params.ropeScore();
      sk.score(logits.ptr(), partMl.ptr(), hit.ptr(), c.kv(), rope ? qs.ptr() : qf.ptr(), heads, params.sinks(), cands,
          p, params.gqaMod(), voteScale, rope);
    }
    boolean prebuilt = SelectKernels.histogramInVotes(count, cands, params.pool());
    sk.votes(votes.ptr(), prebuilt ? topWs.ptr() : null, logits.ptr(), partMl.ptr(), hit.ptr(), heads, kvHeads, cands,
        p.splits(), params.perKvHead(), params.gqaMod());
    CUdeviceptr vals = votes.ptr();
    int n = cands;
    if (params.pool() > 1) {
      pooled = env.ctx().grow(pooled, (long) lists * cands * 4, "TokenSelect pooled votes");
      n = sk.maxPool(pooled.ptr(), votes.ptr(), hit.ptr(), lists, cands, params.pool());
      vals = pooled.ptr();
    }
    cand = env.ctx().grow(cand, SelectKernels.topKCandidateBytes(lists, n), "TokenSelect top-k candidates");
    sk.topKLists(topPtr, list.ptr(), vals, hit.ptr(), topWs.ptr(), cand.ptr(), lists, n, count, params.sinks(), local,
        end, prebuilt);
  }

  /**
   * The front of a block: fingerprint, cache check (cache on) and, with compact positions, row i's
   * query rotated at listLen - m + i (its own slot is the last of the listLen - m + i + 1 entries
   * it sees); with score=rope also the mean of the rows' queries rotated at their real positions
   * c.pos0() + row0 + i (qs; the cache still decides on the neutral fingerprint qf). Returns the
   * queries list attention reads. One row (decode): one launch for all of it.
   */
  private CUdeviceptr front(LayerCall c, int layer, int row0, int m, int listLen, boolean possible) {
    CUdeviceptr qPre = c.qPre().withByteOffset((long) row0 * c.qStride() * 4);
    CUdeviceptr cached = cachedQf.at((long) layer * qDim * 4);
    int realPos = c.pos0() + row0; // position of the block's first row
    if (params.compact()) {
      ensureTable(listLen);
      qRot = env.ctx().grow(qRot, (long) Math.max(m, params.chunk()) * qDim * 2, "TokenSelect rotated queries");
    }
    if (m == 1) {
      // cache off: possible and store are false, so the flag is written 0 and the cache left alone
      sk.decodeFront(qf.ptr(), hit.ptr(), hits.ptr(), cached, params.compact() ? qRot.ptr() : null, qPre, fpCos.ptr(),
          fpSin.ptr(), params.compact() ? ropeCos.ptr() : null, params.compact() ? ropeSin.ptr() : null, heads, d,
          listLen - 1, possible, params.cacheOn(), params.threshold(), qs == null ? null : qs.ptr(), env.invFreq(),
          realPos);
    } else {
      sk.fingerprint(qf.ptr(), qPre, c.qStride(), m, heads, d, fpCos.ptr(), fpSin.ptr());
      if (qs != null) sk.realQuery(qs.ptr(), qPre, c.qStride(), m, heads, d, env.invFreq(), realPos);
      if (params.cacheOn()) {
        sk.cacheCheck(hit.ptr(), hits.ptr(), cached, qf.ptr(), qDim, possible, true, params.threshold());
      }
      if (params.compact()) {
        env.k().rope(qRot.ptr(), qPre, c.qStride(), m, heads, d, env.invFreq(), null, listLen - m);
      }
    }
    return params.compact() ? qRot.ptr() : c.q().withByteOffset((long) row0 * qDim * 2);
  }

  private void ensureTable(int positions) {
    if (tablePositions >= positions) return;
    int p = Math.max(positions, tablePositions * 2);
    ropeCos = env.ctx().grow(ropeCos, (long) p * (d / 2) * 4, "TokenSelect RoPE cos table");
    ropeSin = env.ctx().grow(ropeSin, (long) p * (d / 2) * 4, "TokenSelect RoPE sin table");
    lk.ropeTable(ropeCos.ptr(), ropeSin.ptr(), env.invFreq(), p, d / 2);
    tablePositions = p;
  }

  /** Counts the block's work exactly as the CPU twin does. */
  private void record(int layer, int m, int context, int end, int listLen, boolean decode) {
    if (decode) {
      stats.decode(layer, (double) listLen * heads, context, heads);
    } else {
      stats.prefill(layer, SelectionStats.densePairs(m, listLen - m, heads), SelectionStats.densePairs(m, end - m, heads));
    }
  }


  @Override
  public void collect() {
    timer.collect(stats);
    if (!params.cacheOn()) return;
    env.k().stream().synchronize();
    int[] w = hits.downloadInts(2);
    long total = (w[0] & 0xFFFFFFFFL) | ((long) w[1] << 32);
    stats.cacheHits += total - hitsFolded;
    hitsFolded = total;
  }

  /** The lists (lists, listLen) of the last sparse call (tests; synchronises). */
  int[] downloadLists() {
    env.k().stream().synchronize();
    return list.downloadInts(lists * lastListLen);
  }

  int lastListLen() {
    return lastListLen;
  }

  @Override
  public void close() {
    timer.close();
    lk.close();
    for (DeviceBuffer[] arr : new DeviceBuffer[][] {cachedTop, kq, ks}) {
      for (int i = 0; i < arr.length; i++) {
        if (arr[i] != null) arr[i].close();
        arr[i] = null;
      }
    }
    for (DeviceBuffer b : new DeviceBuffer[] {qf, qs, cachedQf, hit, hits, topWs, top, logits, partMl, votes, pooled, cand,
        list, qRot, ropeCos, ropeSin, fpCos, fpSin}) {
      if (b != null) b.close();
    }
  }
}
