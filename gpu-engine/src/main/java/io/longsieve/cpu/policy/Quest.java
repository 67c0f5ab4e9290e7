package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import java.util.Arrays;

/**
 * Quest baseline (mit-han-lab/Quest, research/algorithms.md §4), decode only. The cache is cut
 * into pages of {@code page} slots; each full page keeps the element-wise min and max of its
 * (rotated) keys per KV head. Per step and query head, page p scores Σ_i max(q_i·min_i, q_i·max_i)
 * with the rotated query; the head attends to its top max(3, budget / page) − 1 pages plus the
 * page holding the newest token, at original positions. The first {@code dense_layers} layers, and
 * any step whose cache fits the budget, are dense.
 */
final class Quest implements ComposedPolicy.Decode {

  private final SelectionStats stats;
  private final int page, budget, denseLayers, heads, kvHeads, d, group;
  private final float[][] minK;  // (layer) → (pages, kvDim) element-wise min of each full page's rotated keys
  private final float[][] maxK;  // (layer) → (pages, kvDim) element-wise max
  private final int[] bounded;   // (layer) full pages whose bounds are computed
  private int[] lists = new int[0];      // (heads, budget-ish) slots each head attends
  private int[] listLen = new int[0];    // (heads)
  private float[] pageScore = new float[0]; // (heads, pages)
  private int[] chosen = new int[0];     // (heads, topPages)

  Quest(PolicyTerm t, SelectionStats stats, AttentionContext ctx) {
    this.stats = stats;
    page = Math.max(1, t.intParam("page"));
    budget = t.intParam("budget");
    denseLayers = t.intParam("dense_layers");
    heads = ctx.config().numHeads();
    kvHeads = ctx.config().numKvHeads();
    d = ctx.config().headDim();
    group = ctx.config().group();
    int layers = ctx.config().numLayers();
    minK = new float[layers][0];
    maxK = new float[layers][0];
    bounded = new int[layers];
  }

  @Override
  public void reset() {
    Arrays.fill(bounded, 0);
  }

  @Override
  public void decode(int layer, float[] q, int pos, KvCache kv, float[] out, AttentionContext ctx) {
    int n = kv.length(layer);
    int topPages = Math.max(3, budget / page);
    int full = (n - 1) / page; // full pages before the page holding the newest token
    if (layer < denseLayers || topPages >= full + 1) {
      DenseAttention.attendRows(layer, q, 1, pos, n - 1, kv, out, ctx);
      stats.decode(layer, (double) n * heads, pos + 1, heads);
      return;
    }
    long t0 = System.nanoTime();
    updateBounds(layer, kv, full);
    int pick = topPages - 1, cap = pick * page + page;
    if (lists.length < heads * cap) lists = new int[heads * cap];
    if (listLen.length < heads) listLen = new int[heads];
    if (pageScore.length < heads * full) pageScore = new float[heads * full];
    if (chosen.length < heads * pick) chosen = new int[heads * pick];
    float[] mn = minK[layer], mx = maxK[layer];
    int kvDim = kv.kvDim;
    float scale = ctx.scale();
    // selection, then attention, each split over heads; each head owns its rows of every buffer
    ctx.pool().forRange(heads, (from, to) -> {
      RotationScratch rs = RotationScratch.of(d);
      float[] qr = rs.qr, cos = rs.cos, sin = rs.sin;
      long[] w = new long[full];
      ctx.rope().angles(pos, cos, sin);
      for (int h = from; h < to; h++) {
        int g = h / group;
        System.arraycopy(q, h * d, qr, 0, d);
        ctx.rope().apply(qr, 0, 1, cos, sin);
        for (int p = 0; p < full; p++) {
          float s = 0;
          int o = p * kvDim + g * d;
          for (int i = 0; i < d; i++) s += Math.max(qr[i] * mn[o + i], qr[i] * mx[o + i]);
          pageScore[h * full + p] = s;
        }
        TopK.select(pageScore, h * full, full, pick, w, chosen, h * pick, 0);
        int len = 0, lo = h * cap;
        for (int c = 0; c < pick; c++) for (int s = 0; s < page; s++) lists[lo + len++] = chosen[h * pick + c] * page + s;
        for (int s = full * page; s < n; s++) lists[lo + len++] = s;
        listLen[h] = len;
      }
    });
    stats.selectionNanos += System.nanoTime() - t0;
    ctx.pool().forRange(heads, (from, to) -> {
      RotationScratch rs = RotationScratch.of(d);
      float[] qr = rs.qr, cos = rs.cos, sin = rs.sin;
      ctx.rope().angles(pos, cos, sin);
      for (int h = from; h < to; h++) {
        System.arraycopy(q, h * d, qr, 0, d);
        ctx.rope().apply(qr, 0, 1, cos, sin);
        ListAttention.attend(layer, h, qr, 0, lists, h * cap, listLen[h], null, 0, kv, out, h * d, scale);
      }
    });
    double attended = 0;
    for (int h = 0; h < heads; h++) attended += listLen[h];
    stats.decode(layer, attended, pos + 1, heads);
  }

  /** Computes min/max of every full page not yet bounded (pages never change once full). */
  private void updateBounds(int layer, KvCache kv, int full) {
    int kvDim = kv.kvDim;
    if (minK[layer].length < full * kvDim) {
      int grow = Math.max(full, minK[layer].length / Math.max(1, kvDim) * 2) * kvDim;
      minK[layer] = Arrays.copyOf(minK[layer], grow);
      maxK[layer] = Arrays.copyOf(maxK[layer], grow);
    }
    float[] keys = kv.ropedKeys[layer], mn = minK[layer], mx = maxK[layer];
    for (int p = bounded[layer]; p < full; p++) {
      int o = p * kvDim;
      System.arraycopy(keys, p * page * kvDim, mn, o, kvDim);
      System.arraycopy(keys, p * page * kvDim, mx, o, kvDim);
      for (int s = p * page + 1; s < (p + 1) * page; s++) {
        for (int e = 0; e < kvDim; e++) {
          float v = keys[s * kvDim + e];
          if (v < mn[o + e]) mn[o + e] = v;
          if (v > mx[o + e]) mx[o + e] = v;
        }
      }
    }
    bounded[layer] = Math.max(bounded[layer], full);
  }
}
