package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;

/**
 * The oracle selector ({@code oracle:k=N} or {@code oracle:frac=F}): not a method to run in production
 * but the reference of what a budget allows. Every query row and every query head attends to the
 * top-k of its own true attention logits (the same q·k/√d + bias dense attention would compute, so
 * the same order as its softmax probabilities) over every slot it may see, and to nothing else. A
 * policy that attends k keys per query can at best do what this does at the same k; the gap between
 * a policy and the oracle at its budget is the selector's, the gap between the oracle and dense is
 * the budget's.
 *
 * <p>k per query: {@code max(1, round(frac × visible))} when frac &gt; 0, else {@code min(k, visible)},
 * where visible is the number of slots the query sees (causal, the model's sliding window applied).
 * When k covers every visible slot the query attends densely (the same kernel as dense attention).
 * Ties go to the lower slot ({@link TopK}). Cost: a dense score row plus a top-k per query and head,
 * i.e. dense attention's cost and more; CPU only (the catalog keeps the CUDA backend from it).
 */
final class OracleSelection implements ComposedPolicy.Prefill, ComposedPolicy.Decode {

  private final SelectionStats stats;
  private final int k;
  private final double frac;
  private final int heads, d, group;

  OracleSelection(PolicyTerm t, SelectionStats stats, AttentionContext ctx) {
    this.stats = stats;
    this.k = t.intParam("k");
    this.frac = t.doubleParam("frac");
    ModelConfig c = ctx.config();
    heads = c.numHeads();
    d = c.headDim();
    group = c.group();
  }

  /** Keys one query that sees {@code visible} slots attends. */
  int budget(int visible) {
    int want = frac > 0 ? (int) Math.max(1, Math.round(frac * visible)) : k;
    return Math.min(want, visible);
  }

  @Override
  public void prefill(int layer, float[] q, int n, int pos0, KvCache kv, float[] out, AttentionContext ctx) {
    int before = kv.length(layer) - n;
    attendRows(layer, q, n, pos0, before, kv, out, ctx);
    stats.prefill(layer, attendedPairs(n, before, ctx), SelectionStats.densePairs(n, before, heads));
  }

  @Override
  public void decode(int layer, float[] q, int pos, KvCache kv, float[] out, AttentionContext ctx) {
    int n = kv.length(layer);
    attendRows(layer, q, 1, pos, n - 1, kv, out, ctx);
    stats.decode(layer, attendedPairs(1, n - 1, ctx), pos + 1, heads);
  }

  /** Keys attended by rows 0..n-1 whose first sees before + 1 slots, summed over heads. */
  private double attendedPairs(int n, int before, AttentionContext ctx) {
    int window = ctx.config().slidingWindow();
    double pairs = 0;
    for (int i = 0; i < n; i++) {
      int end = before + i + 1;
      int visible = window > 0 ? Math.min(end, window) : end;
      pairs += budget(visible);
    }
    return pairs * heads;
  }

  /** Query row i (position pos0 + i) picks and attends its top-k of slots [start, before + i + 1). */
  private void attendRows(int layer, float[] q, int n, int pos0, int before, KvCache kv, float[] out,
                          AttentionContext ctx) {
    ModelConfig c = ctx.config();
    float scale = ctx.scale();
    ctx.pool().forRange(n * heads, (from, to) -> {
      RotationScratch rs = RotationScratch.of(d);
      float[] qr = rs.qr, cos = rs.cos, sin = rs.sin;
      float[] logits = new float[0];
      long[] work = new long[0];
      int[] chosen = new int[0];
      for (int task = from; task < to; task++) {
        int i = task / heads, h = task % heads, kvh = h / group;
        int end = before + i + 1;
        int start = c.slidingWindow() > 0 ? Math.max(0, end - c.slidingWindow()) : 0;
        int visible = end - start, kk = budget(visible);
        ctx.rope().angles(pos0 + i, cos, sin);
        System.arraycopy(q, (i * heads + h) * d, qr, 0, d);
        ctx.rope().apply(qr, 0, 1, cos, sin);
        int oo = (i * heads + h) * d;
        if (kk >= visible) {
          DenseAttention.attendHead(layer, h, qr, start, end, kv, out, oo, ctx);
          continue;
        }
        if (logits.length < visible) {
          logits = new float[visible];
          work = new long[visible];
          chosen = new int[visible];
        }
        float[] keys = kv.ropedKeys[layer];
        float[] bias = kv.logitBias[layer];
        for (int s = start; s < end; s++) {
          float v = CpuOps.dot(qr, 0, keys, s * kv.kvDim + kvh * d, d) * scale;
          if (bias != null) v += bias[s * kv.nKvHeads() + kvh];
          logits[s - start] = v;
        }
        int m = TopK.select(logits, 0, visible, kk, work, chosen, 0, start);
        ListAttention.attend(layer, kvh, qr, 0, chosen, 0, m, null, 0, kv, out, oo, scale);
      }
    });
  }
}
