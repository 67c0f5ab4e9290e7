package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.ListKernels;
import io.longsieve.cuda.kernels.SelectKernels;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionProbe;
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
 * quantised only when the scored range outgrows it (once every local-window steps). Inside a
 * captured decode step (cuda/DecodeStep) the same launches run from a CUDA graph: {@link #planStep}
 * takes every layer's decisions on the host and {@link #launchStep} reads the sizes that move by
 * one slot a step (context end, candidates, top-k input, position) from the step's plan; a change
 * of anything else the launches bake in (top-k count, grids, a buffer reallocated, a cache decision
 * that can no longer hit) is a new shape version, so a new graph.
 *
 * <p>Failure semantics: {@code score=rope} with {@code index=int4} throws IllegalArgumentException
 * from the constructor (as the CPU twin); unsupported shapes (head size, more than 8 query heads
 * per KV head) throw IllegalArgumentException from the first call; CUDA errors propagate from the
 * call that queued the work; device memory grows on demand (synchronising once) and is freed on
 * close. Statistics: selection time is device time in the prefill ({@link SelectionTimer}), the host's
 * time to queue the selection in decode steps.
 */
public final class GpuTokenSelect implements GpuParts.Prefill, GpuParts.CapturedDecode {

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
  private long reallocations;             // buffers replaced so far: a captured step holds the old pointers

  // a captured decode step's decisions (planStep), which its launches (launchStep) follow
  private TokenSelectParams.Block stepBlock;
  private int stepEnd;
  private final boolean[] stepPossible;   // (layer) the Selection Cache may hit
  private final int[] shape;              // (SIZES_SHAPE + layer) what the step's launches bake in
  private final ShapeVersion version;
  private static final int SIZES_SHAPE = 11;  // shape ints before the layers' cache decisions

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
    stepPossible = new boolean[layers];
    shape = new int[SIZES_SHAPE + layers];
    version = new ShapeVersion(shape.length);
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
    if (params.int4()) index(c.kv(), c.layer(), c.before() + c.n(), c.before() + c.n());
    for (int s = 0; s < c.n(); s += params.chunk()) {
      int m = Math.min(params.chunk(), c.n() - s);
      block(c, s, m, c.before() + s + m, false);
    }
  }

  /**
   * The Selection Cache as the prefix's last call left it (the first call after the prefix reads it):
   * the cached fingerprints and each layer's cached top-k with its count, copied on the device; none
   * with the cache off. The int4 copy needs nothing: a fork's quantises every slot on its first call,
   * each slot alone, to the same values.
   */
  @Override
  public GpuParts.KeptState keepState() {
    if (!params.cacheOn()) return null;
    CudaStream st = env.k().stream();
    int layers = cachedCount.length;
    DeviceBuffer fingerprints = env.ctx().alloc((long) layers * qDim * 4, "kept TokenSelect fingerprints");
    DeviceBuffer[] tops = new DeviceBuffer[layers];
    KeptSelectionCache kept = new KeptSelectionCache(env.ctx(), fingerprints, tops, cachedCount.clone());
    try {
      st.copyOnDevice(fingerprints.ptr(), cachedQf.ptr(), fingerprints.bytes());
      for (int l = 0; l < layers; l++) {
        if (cachedCount[l] == 0 || cachedTop[l] == null) continue;
        long bytes = (long) lists * cachedCount[l] * 4;
        tops[l] = env.ctx().alloc(bytes, "kept TokenSelect top-k");
        st.copyOnDevice(tops[l].ptr(), cachedTop[l].ptr(), bytes);
      }
    } catch (RuntimeException | Error e) {
      kept.close();
      throw e;
    }
    return kept;
  }

  @Override
  public void adoptState(GpuParts.KeptState state) {
    KeptSelectionCache kept = (KeptSelectionCache) state;
    CudaStream st = env.k().stream();
    st.copyOnDevice(cachedQf.ptr(), kept.fingerprints().ptr(), kept.fingerprints().bytes());
    for (int l = 0; l < cachedCount.length; l++) {
      int count = kept.tops()[l] == null ? 0 : kept.counts()[l];
      cachedCount[l] = count;
      if (count == 0) continue;
      int room = Math.max(count, params.kFrac() > 0 ? count * 5 / 4 : params.k()); // as cacheSlot sizes it
      cachedTop[l] = grow(cachedTop[l], (long) lists * room * 4, "TokenSelect cached top-k");
      st.copyOnDevice(cachedTop[l].ptr(), kept.tops()[l].ptr(), (long) lists * count * 4);
    }
  }

  @Override
  public void decode(LayerCall c) {
    int end = c.before() + 1;
    if (params.int4()) index(c.kv(), c.layer(), end, params.block(end, 1).scoredEnd());
    block(c, 0, 1, end, true);
  }

  /**
   * The host half of a captured decode step (see {@link GpuParts.CapturedDecode}): every layer's
   * decisions as {@link #decode} takes them, the statistics, the buffers grown, and the int4 copy
   * extended here, outside the graph, over the slots cached before the step (the scoring reads only
   * slots ending a local window before it; each slot quantises alone, so the copy holds the same
   * values as the eager path's). The step's sizes: {@link SelectKernels#STEP_INTS} ints at sizes[at].
   */
  @Override
  public long planStep(PagedKvCache kv, int end, int pos, int[] sizes, int at) {
    long t0 = System.nanoTime();
    TokenSelectParams.Block bp = params.block(end, 1);
    stepBlock = bp;
    stepEnd = end;
    int n = bp.cands();
    if (!bp.dense() && params.pool() > 1) n = SelectKernels.pooledLength(bp.cands(), params.pool());
    sizes[at + SelectKernels.STEP_END] = end;
    sizes[at + SelectKernels.STEP_CANDS] = bp.cands();
    sizes[at + SelectKernels.STEP_N] = n;
    sizes[at + SelectKernels.STEP_POS] = pos;
    for (int l = 0; l < stepPossible.length; l++) {
      if (bp.dense()) {
        record(l, 1, pos + 1, end, end, true);
        continue;
      }
      if (params.int4()) index(kv.layer(l), l, end - 1, bp.scoredEnd());
      stepPossible[l] = cacheSlot(l, bp.count());
      record(l, 1, pos + 1, end, bp.listLen(), true);
    }
    if (!bp.dense()) {
      grow(bp, 1);
      stats.selectionNanos += System.nanoTime() - t0;
    }
    // what the launches bake in besides the moving sizes: a change is a new shape (a new graph); a
    // dense step bakes nothing of its own (its attention reads the step's DecodeRow)
    Arrays.fill(shape, 0);
    shape[0] = bp.dense() ? 1 : 0;
    if (!bp.dense()) {
      SelectKernels.ScorePlan p = sk.plan(bp.cands(), kvHeads);
      int sms = env.k().smCount();
      shape[1] = bp.count();
      shape[2] = bp.listLen();
      shape[3] = p.chunk();
      shape[4] = p.splits();
      shape[5] = SelectKernels.voteBlocks(bp.cands(), sms);
      shape[6] = SelectKernels.poolBlocks(n);
      shape[7] = SelectKernels.topKBlocks(n, lists, sms);
      shape[8] = SelectKernels.histogramInVotes(bp.count(), bp.cands(), params.pool()) ? 1 : 0;
      shape[9] = (int) reallocations;
      shape[10] = (int) lk.generation();
      for (int l = 0; l < stepPossible.length; l++) shape[SIZES_SHAPE + l] = stepPossible[l] ? 1 : 0;
    }
    return version.of(shape);
  }

  /**
   * One layer's launches of the step {@link #planStep} planned, the moving sizes read from step;
   * a dense step attends through the step's row (the DecodeRow at row, splits of the grid).
   */
  @Override
  public boolean stepAttendsDense(int layer) {
    return stepBlock.dense();
  }

  @Override
  public void launchStep(LayerCall c, CUdeviceptr step) {
    // c's positions are the capturing step's: the kernels read this step's from the plan
    CUdeviceptr q = select(c, 0, 1, stepBlock, stepEnd, c.pos0(), stepPossible[c.layer()], step);
    attend(c, c.out(), q, 1, stepBlock);
  }

  @Override
  public void reset() {
    Arrays.fill(cachedCount, 0);
    Arrays.fill(indexed, 0); // slots moved: the int4 copy is rebuilt on the next call
  }

  /**
   * Makes the layer's int4 copy cover slots [0, need) (what this call's scoring reads), quantising
   * every slot below total (the cached ones) when it launches (all slots after a reset or growth). In
   * decode the scored slots end {@code local} before the newest, so this launches once every
   * {@code local} steps rather than every step.
   */
  private void index(Kernels.KvView kv, int layer, int total, int need) {
    if (indexed[layer] > total) indexed[layer] = 0;
    if (quantiseFrom(indexed[layer], need) < 0) return;
    long bytes = (long) total * kvHeads * (d / 2);
    if (kq[layer] == null || kq[layer].bytes() < bytes) {
      int cap = int4Slots(total);
      kq[layer] = grow(kq[layer], (long) cap * kvHeads * (d / 2), "TokenSelect int4 keys");
      ks[layer] = grow(ks[layer], (long) cap * kvHeads * 4, "TokenSelect int4 scales");
      indexed[layer] = 0;
    }
    sk.quantise(kq[layer].ptr(), ks[layer].ptr(), kv, indexed[layer], total - indexed[layer]);
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
          env.config().window(layer), env.scale(), env.ws());
      record(layer, m, c.pos0() + row0 + m, end, end, decode);
      return;
    }
    // prefill blocks in device time (selection_ms); decode steps by the host's clock, as the queueing time
    // profile and eval read (the stats stop at the prefill: events per decode step and layer cost too much)
    long t0 = System.nanoTime();
    CudaStream.Event e0 = decode ? null : timer.start();
    boolean possible = cacheSlot(layer, bp.count());
    grow(bp, m);
    CUdeviceptr q = select(c, row0, m, bp, end, c.pos0() + row0, possible, null);
    if (decode) stats.selectionNanos += System.nanoTime() - t0;
    else timer.stop(e0);
    if (SelectionProbe.active()) probe(c, row0, m, end, decode, bp);
    attend(c, out, q, m, bp);
    record(layer, m, c.pos0() + row0 + m, end, bp.listLen(), decode);
  }

  /**
   * The selection of a sparse block and its inputs for {@link SelectionProbe}, read back from the
   * device (synchronises); a Selection Cache hit scored nothing and reports nothing.
   */
  private void probe(LayerCall c, int row0, int m, int end, boolean decode, TokenSelectParams.Block bp) {
    if (params.cacheOn() && hit.downloadInts(1)[0] != 0) return;
    float[] queries = ProbeReadback.f32Rows(env, c.qPre(), c.qStride(), row0, m, qDim);
    SelectionProbe.report(new SelectionProbe.TokenSelect(c.layer(), c.pos0() + row0, m, end, decode, lists, queries,
        () -> ProbeReadback.keys(env, c.kv(), false, end), votes.downloadFloats(lists * bp.cands()),
        list.downloadInts(lists * bp.listLen())));
  }

  /**
   * The Selection Cache's side of a sparse block selecting count slots in a layer: whether the
   * device's cached top-k may be reused (its count matches; the device decides on the fingerprint),
   * the cached top-k's buffer sized, the lookup counted. False with the cache off.
   */
  private boolean cacheSlot(int layer, int count) {
    if (!params.cacheOn()) return false;
    stats.cacheLookups++;
    boolean possible = cachedCount[layer] == count && cachedTop[layer] != null;
    if (!possible) {
      int room = Math.max(count, params.kFrac() > 0 ? count * 5 / 4 : params.k());
      cachedTop[layer] = grow(cachedTop[layer], (long) lists * room * 4, "TokenSelect cached top-k");
    }
    cachedCount[layer] = count; // a miss stores this count's top-k, a hit had it already
    return possible;
  }

  /** Every scratch buffer a sparse block of m rows with these sizes launches with, at its size. */
  private void grow(TokenSelectParams.Block bp, int m) {
    int cands = bp.cands(), count = bp.count();
    if (!params.cacheOn()) top = grow(top, (long) lists * count * 4, "TokenSelect top-k");
    list = grow(list, (long) lists * bp.listLen() * 4, "TokenSelect lists");
    if (params.compact()) {
      ensureTable(bp.listLen());
      qRot = grow(qRot, (long) Math.max(m, params.chunk()) * qDim * 2, "TokenSelect rotated queries");
    }
    if (count == 0) return;
    SelectKernels.ScorePlan p = sk.plan(cands, kvHeads);
    logits = grow(logits, (long) heads * cands * 4, "TokenSelect logits");
    partMl = grow(partMl, (long) heads * p.splits() * 2 * 4, "TokenSelect softmax partials");
    votes = grow(votes, (long) lists * cands * 4, "TokenSelect votes");
    int n = cands;
    if (params.pool() > 1) {
      pooled = grow(pooled, (long) lists * cands * 4, "TokenSelect pooled votes");
      n = SelectKernels.pooledLength(cands, params.pool());
    }
    cand = grow(cand, SelectKernels.topKCandidateBytes(lists, n), "TokenSelect top-k candidates");
  }

  /** env's grow, counting reallocations: a captured step holds the old pointers. */
  private DeviceBuffer grow(DeviceBuffer b, long bytes, String what) {
    DeviceBuffer g = env.ctx().grow(b, bytes, what);
    if (g != b) reallocations++;
    return g;
  }

  /**
   * The launches of a sparse block (buffers grown, cache slot decided): front, selection into the
   * lists; returns the queries the list attention reads. realPos: position of the block's first
   * row. A non-null step (a captured decode step) gives the moving sizes from device memory.
   */
  private CUdeviceptr select(LayerCall c, int row0, int m, TokenSelectParams.Block bp, int end, int realPos,
                             boolean possible, CUdeviceptr step) {
    int layer = c.layer();
    CUdeviceptr topPtr = params.cacheOn() ? cachedTop[layer].ptr() : top.ptr();
    CUdeviceptr q = front(c, layer, row0, m, bp.listLen(), possible, realPos, step);
    if (bp.count() > 0) selectTop(c, topPtr, bp.cands(), bp.count(), bp.local(), end, step);
    else sk.topKLists(topPtr, list.ptr(), null, hit.ptr(), topWs.ptr(), null, lists, bp.cands(), 0, params.sinks(),
        bp.local(), end, false, step); // lists
    lastListLen = bp.listLen();
    return q;
  }

  private void attend(LayerCall c, CUdeviceptr out, CUdeviceptr q, int m, TokenSelectParams.Block bp) {
    lk.attend(out, q, c.kv(), list.ptr(), lists, bp.listLen(), m, heads, params.compact(),
        params.compact() ? ropeCos.ptr() : null,
        params.compact() ? ropeSin.ptr() : null, params.compact() ? env.invFreq() : null, env.scale());
  }

  /**
   * Scoring, vote, pool, then ONE launch for the top-k into topPtr (lists, count) and the lists
   * sinks ++ top ++ local; on a hit all but the lists are skipped on the device (topPtr is cached).
   * Without pooling the vote kernel also builds the top-k's first histogram (in topWs).
   */
  private void selectTop(LayerCall c, CUdeviceptr topPtr, int cands, int count, int local, int end, CUdeviceptr step) {
    SelectKernels.ScorePlan p = sk.plan(cands, kvHeads);
    if (params.int4()) {
      sk.scoreInt4(logits.ptr(), partMl.ptr(), hit.ptr(), kq[c.layer()].ptr(), ks[c.layer()].ptr(), qf.ptr(), heads,
          kvHeads, d, params.sinks(), cands, p, params.gqaMod(), voteScale, step);
    } else {
      // score=rope: the rotated keys (kRope) against the real-position query, the true logits
      boolean rope = params.ropeScore();
      sk.score(logits.ptr(), partMl.ptr(), hit.ptr(), c.kv(), rope ? qs.ptr() : qf.ptr(), heads, params.sinks(), cands,
          p, params.gqaMod(), voteScale, rope, step);
    }
    boolean prebuilt = SelectKernels.histogramInVotes(count, cands, params.pool());
    sk.votes(votes.ptr(), prebuilt ? topWs.ptr() : null, logits.ptr(), partMl.ptr(), hit.ptr(), heads, kvHeads, cands,
        p.splits(), params.perKvHead(), params.gqaMod(), step);
    CUdeviceptr vals = votes.ptr();
    int n = cands;
    if (params.pool() > 1) {
      n = sk.maxPool(pooled.ptr(), votes.ptr(), hit.ptr(), lists, cands, params.pool(), step);
      vals = pooled.ptr();
    }
    sk.topKLists(topPtr, list.ptr(), vals, hit.ptr(), topWs.ptr(), cand.ptr(), lists, n, count, params.sinks(), local,
        end, prebuilt, step);
  }

  /**
   * The front of a block: fingerprint, cache check (cache on) and, with compact positions, row i's
   * query rotated at listLen - m + i (its own slot is the last of the listLen - m + i + 1 entries
   * it sees); with score=rope also the mean of the rows' queries rotated at their real positions
   * c.pos0() + row0 + i (qs; the cache still decides on the neutral fingerprint qf). Returns the
   * queries list attention reads. One row (decode): one launch for all of it.
   */
  private CUdeviceptr front(LayerCall c, int layer, int row0, int m, int listLen, boolean possible, int realPos,
                            CUdeviceptr step) {
    CUdeviceptr qPre = c.qPre().withByteOffset((long) row0 * c.qStride() * 4);
    CUdeviceptr cached = cachedQf.at((long) layer * qDim * 4);
    if (m == 1) {
      // cache off: possible and store are false, so the flag is written 0 and the cache left alone
      sk.decodeFront(qf.ptr(), hit.ptr(), hits.ptr(), cached, params.compact() ? qRot.ptr() : null, qPre, fpCos.ptr(),
          fpSin.ptr(), params.compact() ? ropeCos.ptr() : null, params.compact() ? ropeSin.ptr() : null, heads, d,
          listLen - 1, possible, params.cacheOn(), params.threshold(), qs == null ? null : qs.ptr(), env.invFreq(),
          realPos, step);
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
    ropeCos = grow(ropeCos, (long) p * (d / 2) * 4, "TokenSelect RoPE cos table");
    ropeSin = grow(ropeSin, (long) p * (d / 2) * 4, "TokenSelect RoPE sin table");
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
