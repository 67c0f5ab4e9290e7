package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.DeviceAddress;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.QuestKernels;
import io.longsieve.cuda.kernels.SelectKernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import java.util.Arrays;
import jcuda.driver.CUdeviceptr;

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
 * synchronisation per step), so selectionNanos stays as the other parts leave it. Runs inside
 * captured decode steps too ({@link GpuParts.CapturedDecode}): the page bounds are extended in the
 * plan, outside the graph; the position and the newest page's tail are read from the step's plan,
 * and a filled page (one more to score) is a new shape version.
 */
public final class GpuQuest implements GpuParts.CapturedDecode {

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
  private long reallocations;                // buffers replaced (a captured step holds pointers)
  private int stepN, stepFull;               // the planned captured step: slots seen, full pages
  private final int[] shape = new int[4];    // full pages, attention chunk and splits, reallocations
  private final ShapeVersion version = new ShapeVersion(shape.length);

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
  CUdeviceptr chosenPages() {
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
      env.k().attention(c.out(), c.q(), c.kv(), 1, heads, c.before(), env.config().window(layer), env.scale(),
          env.ws());
      stats.decode(layer, (double) n * heads, c.pos0() + 1, heads);
      return;
    }
    updateBounds(layer, c.kv(), full);
    QuestKernels.Plan plan = grow(n, full);
    launchSparse(c, n, full, plan, null);
    stats.decode(layer, (double) listLength(n, page, pick) * heads, c.pos0() + 1, heads);
  }

  /** Scratch for a sparse step over n slots (full pages): scores, attention partials; returns the attention's plan. */
  private QuestKernels.Plan grow(int n, int full) {
    QuestKernels.Plan plan = qk.plan(listLength(n, page, pick), heads);
    DeviceBuffer s = env.ctx().grow(score, (long) heads * full * 4, "Quest page scores");
    DeviceBuffer p = env.ctx().grow(part, plan.partialFloats(heads, d) * 4, "Quest attention partials");
    if (s != score || p != part) reallocations++;
    score = s;
    part = p;
    return plan;
  }

  /** A sparse step's launches: page scores, top pages, attention; step non-null: position and tail from its plan. */
  private void launchSparse(LayerCall c, int n, int full, QuestKernels.Plan plan, CUdeviceptr step) {
    int layer = c.layer();
    qk.scores(score.ptr(), c.qPre(), env.invFreq(), c.pos0(), minK[layer].ptr(), maxK[layer].ptr(), heads, kvHeads, d,
        full, step);
    qk.topk(chosen.ptr(), score.ptr(), heads, full, pick);
    qk.attend(c.out(), part.ptr(), plan, c.qPre(), env.invFreq(), c.pos0(), c.kv(), chosen.ptr(), heads, page, pick,
        full, n - full * page, env.scale(), step);
  }

  /**
   * A captured step: every layer's dense/sparse choice and statistics, the page bounds extended
   * (outside the graph: the full pages hold only slots cached before the step), scratch grown. What
   * moves inside a shape (position, the newest page's slots) goes to sizes.
   */
  @Override
  public long planStep(PagedKvCache kv, int end, int pos, int[] sizes, int at) {
    int full = (end - 1) / page;
    sizes[at + SelectKernels.STEP_END] = end;
    sizes[at + SelectKernels.STEP_POS] = pos;
    boolean anySparse = false;
    for (int l = 0; l < minK.length; l++) {
      if (dense(l, denseLayers, topPages, full)) {
        stats.decode(l, (double) end * heads, pos + 1, heads);
        continue;
      }
      anySparse = true;
      long before = minK[l] == null ? 0 : DeviceAddress.of(minK[l].ptr());
      updateBounds(l, kv.layer(l), full);
      if (DeviceAddress.of(minK[l].ptr()) != before) reallocations++;
      stats.decode(l, (double) listLength(end, page, pick) * heads, pos + 1, heads);
    }
    QuestKernels.Plan plan = anySparse ? grow(end, full) : null;
    stepN = end;
    stepFull = full;
    Arrays.fill(shape, 0);
    if (anySparse) {
      shape[0] = full;
      shape[1] = plan.chunk();
      shape[2] = plan.splits();
      shape[3] = (int) reallocations;
    }
    return version.of(shape);
  }

  @Override
  public boolean stepAttendsDense(int layer) {
    return dense(layer, denseLayers, topPages, stepFull);
  }

  @Override
  public void launchStep(LayerCall c, CUdeviceptr step) {
    launchSparse(c, stepN, stepFull, qk.plan(listLength(stepN, page, pick), heads), step);
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
