package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.LayerList;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import io.longsieve.policy.TsaKeep;
import io.longsieve.policy.TsaSelections;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * Token Sparse Attention for prefill (arXiv 2602.03216; official code dongwonjo/Token-Sparse-Attention,
 * research/algorithms.md §2.3). On a sparse layer, for a prefill chunk whose cache holds N slots:
 * <ol>
 *   <li>proxy attention: the last W' = min(W, chunk) queries, at their positions, softmax over all N
 *       keys (causal among the window, scale 1/√d); a[h, j] = mean probability of prefix key j &lt; N − W';</li>
 *   <li>avg-pool (kernel {@code pool}, padding pool/2, zero padding counted); per-head normalisation
 *       p_h = a_h / (Σ a_h + 1e-8); head mean g = mean_h a_h, normalised the same way;</li>
 *   <li>sort g ascending, fp32 cumulative sum; n_drop = #{cumsum &lt; τ}; none → dense; else
 *       n_drop + 1 tokens go; keep = max(min, P − n_drop), the same count for every head (with the
 *       benchmark knob {@code keep=F} &gt; 0 instead keep = max(min, ⌈F·P⌉), see {@link TsaKeep});</li>
 *   <li>per head: top-keep of p_h (ties to the lower slot) ++ the window, ascending;</li>
 *   <li>each chunk query that is in its head's list attends to the list entries up to itself at
 *       original positions; the other queries get zero output from that head (their hidden state
 *       goes on through the residual stream); the KV cache keeps every token for decode.</li>
 * </ol>
 * Active only when the chunk has more than one query, τ &gt; 0 (or a fixed keep) and N &gt; min + W
 * (official condition). With one chunk covering the prompt this is the official algorithm; with smaller
 * prefill chunks each chunk's queries are the query subset and its last W rows the proxy window,
 * so the proxy costs W / chunk of dense attention per chunk (3 % at W 128, chunk 4096) instead of
 * W / L once. The chunk is the policy's own {@code chunk} parameter (PolicySpec.prefillChunk; 0 =
 * the whole prompt): both backends prefill a TSA request in chunks of exactly that size, whatever
 * their own chunk setting, so a CPU run selects what a GPU run selects. Sparse layers: {@link LayerList}.
 */
final class TokenSparseAttention implements ComposedPolicy.Prefill {

  private final SelectionStats stats;
  private final ModelConfig c;
  private final double tau;
  private final double keepFraction; // > 0: keep this share of the prefix instead of tau's cut-off
  private final int min, window, pool;
  private final boolean[] sparse;   // (layer) this layer may be made sparse
  private final int heads, d, group;

  private float[] proxy = new float[0];   // (heads, prefix) mean window probability, then pooled
  private float[] pooledRow = new float[0]; // (prefix) one head's pooled row
  private float[] global = new float[0];  // (prefix) head mean, normalised
  private long[] work = new long[0];      // (prefix) sort / top-k scratch
  private int[] lists = new int[0];       // (heads, keep + W') selected slots per head
  private float[] rowStats = new float[0]; // (heads, W', 2) softmax max and sum per window query

  TokenSparseAttention(PolicyTerm t, SelectionStats stats, AttentionContext ctx, Path modelDir) {
    this.stats = stats;
    this.c = ctx.config();
    tau = t.doubleParam("tau");
    keepFraction = t.doubleParam("keep");
    min = t.intParam("min");
    window = t.intParam("window");
    pool = t.intParam("pool");
    sparse = LayerList.resolve(t.text("layers"), c.numLayers(), modelDir);
    heads = c.numHeads();
    d = c.headDim();
    group = c.group();
  }

  /** The resolved sparse layers, e.g. {@code 2-3}. */
  String layerList() {
    return LayerList.format(sparse);
  }

  @Override
  public void prefill(int layer, float[] q, int n, int pos0, KvCache kv, float[] out, AttentionContext ctx) {
    int end = kv.length(layer), before = end - n;
    int w = Math.min(window, n);
    if (!sparse[layer] || n <= 1 || w < 1 || (tau <= 0 && !TsaKeep.fixed(keepFraction)) || end <= min + window) {
      dense(layer, q, n, pos0, before, kv, out, ctx);
      return;
    }
    long t0 = System.nanoTime();
    int prefix = end - w;
    proxyAttention(layer, q, n, pos0, w, prefix, kv, ctx);
    int keep = keepCount(prefix);
    if (keep < 0 || keep >= prefix) {
      stats.selectionNanos += System.nanoTime() - t0;
      dense(layer, q, n, pos0, before, kv, out, ctx);
      return;
    }
    int len = keep + w;
    selectPerHead(prefix, keep, w, len, end);
    stats.selectionNanos += System.nanoTime() - t0;
    if (TsaSelections.active()) TsaSelections.report(layer, pos0, lists, heads, len, pos0 - before);
    stats.markSparse(layer);
    attend(layer, q, n, pos0, before, len, kv, out, ctx);
  }

  private void dense(int layer, float[] q, int n, int pos0, int before, KvCache kv, float[] out, AttentionContext ctx) {
    DenseAttention.attendRows(layer, q, n, pos0, before, kv, out, ctx);
    double pairs = SelectionStats.densePairs(n, before, heads);
    stats.prefill(layer, pairs, pairs);
  }

  /** proxy[h, j] for j &lt; prefix: mean over the last w chunk queries of softmax(q·k/√d)[j], then avg-pooled. */
  void proxyAttention(int layer, float[] q, int n, int pos0, int w, int prefix, KvCache kv, AttentionContext ctx) {
    if (proxy.length < heads * prefix) proxy = new float[heads * prefix];
    float scale = ctx.scale();
    float[] keys = kv.ropedKeys[layer];
    int kvDim = kv.kvDim, end = prefix + w;
    ctx.pool().forRange(heads, (from, to) -> {
      RotationScratch rs = RotationScratch.of(d);
      float[] qr = rs.qr, cos = rs.cos, sin = rs.sin;
      float[] s = new float[end];
      for (int h = from; h < to; h++) {
        int po = h * prefix, ko = (h / group) * d;
        Arrays.fill(proxy, po, po + prefix, 0f);
        for (int r = 0; r < w; r++) {
          int row = n - w + r, visible = prefix + r + 1;
          System.arraycopy(q, (row * heads + h) * d, qr, 0, d);
          ctx.rope().angles(pos0 + row, cos, sin);
          ctx.rope().apply(qr, 0, 1, cos, sin);
          for (int j = 0; j < visible; j++) s[j] = CpuOps.dot(qr, 0, keys, j * kvDim + ko, d) * scale;
          CpuOps.softmax(s, 0, visible);
          for (int j = 0; j < prefix; j++) proxy[po + j] += s[j];
        }
        float inv = 1f / w;
        for (int j = 0; j < prefix; j++) proxy[po + j] *= inv;
      }
    });
    if (pool > 1) {
      if (pooledRow.length < prefix) pooledRow = new float[prefix];
      for (int h = 0; h < heads; h++) {
        avgPool(proxy, h * prefix, prefix, pool, pooledRow);
        System.arraycopy(pooledRow, 0, proxy, h * prefix, prefix);
      }
    }
  }

  /**
   * torch avg_pool1d(kernel, stride 1, padding kernel/2, count_include_pad): every window sum is
   * divided by the kernel, zeros counted at the edges. Output length n + 2·(kernel/2) − kernel + 1.
   */
  static void avgPool(float[] v, int off, int n, int kernel, float[] dst) {
    int pad = kernel / 2, len = n + 2 * pad - kernel + 1;
    for (int o = 0; o < Math.min(len, n); o++) {
      float s = 0;
      for (int j = o - pad; j < o - pad + kernel; j++) if (j >= 0 && j < n) s += v[off + j];
      dst[o] = s / kernel;
    }
    for (int o = len; o < n; o++) dst[o] = 0f; // even kernels: torch's output is one short; the last token scores 0
  }

  /** −1: nothing to drop (dense); else tokens per head to keep from the prefix (&gt;= prefix: dense too). */
  int keepCount(int prefix) {
    if (TsaKeep.fixed(keepFraction)) {
      if (work.length < prefix) work = new long[prefix];  // selectPerHead's top-k scratch
      return TsaKeep.count(prefix, keepFraction, min);
    }
    if (global.length < prefix) global = new float[prefix];
    double total = 0;
    for (int j = 0; j < prefix; j++) {
      float s = 0;
      for (int h = 0; h < heads; h++) s += proxy[h * prefix + j];
      global[j] = s / heads;
      total += global[j];
    }
    float inv = (float) (1.0 / (total + 1e-8));
    if (work.length < prefix) work = new long[prefix];
    for (int j = 0; j < prefix; j++) work[j] = TopK.key(global[j] * inv, j);
    Arrays.sort(work, 0, prefix); // ascending mass; equal masses: higher index first
    float cum = 0;
    int drop = 0;
    for (int j = 0; j < prefix; j++) {
      cum += global[TopK.indexOf(work[j])] * inv;
      if (cum < tau) drop++;
      else break;
    }
    if (drop == 0) return -1;
    drop++;
    return Math.max(min, prefix - drop);
  }

  /** lists[h] = top-keep of p_h (p_h ∝ proxy[h]: same order) ++ window slots [prefix, end), ascending. */
  private void selectPerHead(int prefix, int keep, int w, int len, int end) {
    if (lists.length < heads * len) lists = new int[heads * len];
    for (int h = 0; h < heads; h++) {
      // normalising by a positive per-head constant does not change the order, so rank proxy[h] directly
      TopK.select(proxy, h * prefix, prefix, keep, work, lists, h * len, 0);
      for (int i = 0; i < w; i++) lists[h * len + keep + i] = prefix + i;
    }
  }

  /** Queries in a head's list attend to list entries up to themselves; the rest of the head's rows are zero. */
  private void attend(int layer, float[] q, int n, int pos0, int before, int len, KvCache kv, float[] out,
                      AttentionContext ctx) {
    float scale = ctx.scale();
    ctx.pool().forRange(heads, (from, to) -> {
      RotationScratch rs = RotationScratch.of(d);
      float[] qr = rs.qr, cos = rs.cos, sin = rs.sin;
      for (int h = from; h < to; h++) {
        int lo = h * len;
        for (int i = 0; i < n; i++) Arrays.fill(out, (i * heads + h) * d, (i * heads + h + 1) * d, 0f);
        for (int e = 0; e < len; e++) {
          int slot = lists[lo + e];
          if (slot < before) continue; // a key of an earlier chunk, not a query of this one
          int i = slot - before;
          System.arraycopy(q, (i * heads + h) * d, qr, 0, d);
          ctx.rope().angles(pos0 + i, cos, sin);
          ctx.rope().apply(qr, 0, 1, cos, sin);
          ListAttention.attend(layer, h, qr, 0, lists, lo, e + 1, null, 0, kv, out, (i * heads + h) * d, scale);
        }
      }
    });
    double attended = 0;
    for (int h = 0; h < heads; h++) {
      for (int e = 0; e < len; e++) if (lists[h * len + e] >= before) attended += e + 1;
    }
    stats.prefill(layer, attended, SelectionStats.densePairs(n, before, heads));
  }
}
