package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.QuestKernels;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import java.util.Arrays;

/**
 * Quest on the GPU (twin: cpu/policy/Quest, research/algorithms.md §4), decode only. Each full page
 * of {@code page} slots keeps the element-wise min and max of its rotated keys per KV head, kept
 * on the device and extended at each step by the pages that filled since the last one. Per step and
 * query head, page p scores Σ_i max(q_i·min_i, q_i·max_i) with the query rotated in f32; the head
 * attends to its top max(3, budget / page) − 1 pages (ties to the lower page, as cpu/policy/TopK)
 * plus the page holding the newest token, at original positions. The first {@code dense_layers}
 * layers, and any step whose cache fits the budget, are dense. Page choice is per query head, so
 * the attention is Quest's own kernel rather than the per-KV-head list kernel.
 *
 * <p>Failure semantics: IllegalArgumentException at construction for a head dim the kernels do not
 * take (head dim, more than 16 query heads per KV head); device memory that must grow is reallocated after a synchronisation (bounds of a layer
 * whose buffer grew are recomputed from the cache). Selection time is not measured (no host
 * synchronisation per step), so selectionNanos stays as the other parts leave it.
 */
public final class GpuQuest implements GpuParts.Decode {

  private final SelectionStats stats;
  private final GpuEnv env;
  private final QuestKernels qk;
  private final int page, denseLayers, heads, kvHeads, d, topPages, pick;
  private final long pageBytes;              // one page's bounds: nKv * d bf16
  private final DeviceBuffer[] minK;         // (layer) → (capPages, nKv, d) bf16 element-wise min of rotated keys
  private final DeviceBuffer[] maxK;         // (layer) → (capPages, nKv, d) bf16 element-wise max
  private final int[] capPages;              // (layer) pages minK/maxK hold
  private final int[] bounded;               // (layer) full pages whose bounds are on the device
  private final DeviceBuffer chosen;         // (heads, pick) int pages each head attends
  private DeviceBuffer score;                // (heads, full) f32 page scores
  private DeviceBuffer part;                 // (heads, splits, d + 2) f32 partial outputs of the attention

  public GpuQuest(PolicyTerm t, SelectionStats stats, GpuEnv env) {
    this.stats = stats;
    this.env = env;
    page = Math.max(1, t.intParam("page"));
    int budget = t.intParam("budget");
    denseLayers = t.intParam("dense_layers");
    heads = env.config().numHeads();
    kvHeads = env.config().numKvHeads();
    d = env.config().headDim();
    QuestKernels.checkHeadDim(d);
    if (heads / kvHeads > QuestKernels.MAX_GROUP) {
      throw new IllegalArgumentException("Quest on the GPU takes at most " + QuestKernels.MAX_GROUP + " query heads per KV head");
    }
    topPages = Math.max(3, budget / page);
    pick = topPages - 1;
    pageBytes = (long) kvHeads * d * 2;
    int layers = env.config().numLayers();
    minK = new DeviceBuffer[layers];
    maxK = new DeviceBuffer[layers];
    capPages = new int[layers];
    bounded = new int[layers];
    qk = new QuestKernels(env.k());
    chosen = env.ctx().alloc((long) heads * pick * 4, "Quest chosen pages");
  }

  /** Dense when the layer is one of the first dense_layers or the cache's full pages fit the budget. */
  public static boolean dense(int layer, int denseLayers, int topPages, int full) {
    return layer < denseLayers || topPages >= full + 1;
  }

  /** Slots a head attends in a sparse step: pick pages plus the tail of the page holding the newest token. */
  public static int listLength(int n, int page, int pick) {
    int full = (n - 1) / page;
    return pick * page + (n - full * page);
  }

  /** (heads, pick) int pages each head attended in the last sparse step (tests). */
  jcuda.driver.CUdeviceptr chosenPages() {
    return chosen.ptr();
  }

  public int pick() {
    return pick;
  }

  @Override
  public void reset() {
    Arrays.fill(bounded, 0);
  }

  @Override
  public void decode(LayerCall c) {
    int layer = c.layer(), n = c.before() + 1, full = (n - 1) / page;
    if (dense(layer, denseLayers, topPages, full)) {
      env.k().attention(c.out(), c.q(), c.kv(), 1, heads, c.before(), env.config().slidingWindow(), env.scale(),
          env.ws());
      stats.decode(layer, (double) n * heads, c.pos0() + 1, heads);
      return;
    }
    updateBounds(layer, c.kv(), full);
    score = env.ctx().grow(score, (long) heads * full * 4, "Quest page scores");
    qk.scores(score.ptr(), c.qPre(), env.invFreq(), c.pos0(), minK[layer].ptr(), maxK[layer].ptr(), heads, kvHeads, d,
        full);
    qk.topk(chosen.ptr(), score.ptr(), heads, full, pick);
    int tail = n - full * page, len = pick * page + tail;
    QuestKernels.Plan plan = qk.plan(len, heads);
    part = env.ctx().grow(part, plan.partialFloats(heads, d) * 4, "Quest attention partials");
    qk.attend(c.out(), part.ptr(), plan, c.qPre(), env.invFreq(), c.pos0(), c.kv(), chosen.ptr(), heads, page, pick,
        full, tail, env.scale());
    stats.decode(layer, (double) len * heads, c.pos0() + 1, heads);
  }

  /** Bounds of the full pages not yet bounded; a buffer that must grow is replaced and recomputed whole. */
  private void updateBounds(int layer, Kernels.KvView kv, int full) {
    if (capPages[layer] < full) {
      int cap = full + full / 8 + 64;  // headroom: one page fills every `page` decode steps
      if (minK[layer] != null) {
        env.ctx().synchronize();
        minK[layer].close();
        maxK[layer].close();
        minK[layer] = maxK[layer] = null;
      }
      capPages[layer] = 0;
      minK[layer] = env.ctx().alloc(cap * pageBytes, "Quest page minima");
      maxK[layer] = env.ctx().alloc(cap * pageBytes, "Quest page maxima");
      capPages[layer] = cap;
      bounded[layer] = 0;
    }
    if (bounded[layer] > full) bounded[layer] = 0;  // the cache shrank without a reset: recompute
    qk.bounds(minK[layer].ptr(), maxK[layer].ptr(), kv, page, bounded[layer], full);
    bounded[layer] = full;
  }

  @Override
  public void close() {
    for (int l = 0; l < minK.length; l++) {
      if (minK[l] != null) minK[l].close();
      if (maxK[l] != null) maxK[l].close();
      minK[l] = maxK[l] = null;
    }
    chosen.close();
    if (score != null) score.close();
    if (part != null) part.close();
    score = part = null;
  }
}
