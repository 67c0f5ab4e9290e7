package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicyTerm;
import java.util.Arrays;

/**
 * H2O baseline (FMInference/H2O {@code modify_llama.py}, research/algorithms.md §4). Every query's
 * attention probabilities are accumulated per cached key (the "heavy hitter" score). After the
 * prompt each KV head keeps its top {@code heavy} × N accumulated keys of the older part plus the
 * last {@code recent} × N tokens; that count is then the layer's budget for the whole request: each
 * decode step adds its query's probabilities and, once the cache is over budget, every KV head
 * evicts its lowest-scored token outside the recent window (ties: the oldest), as the official
 * code does step by step. For GQA the scores of a KV head's query heads are summed.
 *
 * <p>Costs on the CPU: accumulating the prompt's attention is a second pass of dense attention
 * scores over the prompt, and every decode step scores the whole (compressed) cache again. Decode
 * policies that key state by slot (Selection Cache, Quest page bounds) are reset at each eviction.
 */
final class H2o implements ComposedPolicy.Kv {

  private final double heavy, recent;
  private final int heads, kvHeads, d, group;
  private final float[][] acc;   // (layer) → (kvHeads, capacity) accumulated attention per slot
  private final int[] budget;    // (layer) slots kept per KV head after the prompt; -1: no eviction
  private final int[] recentN;   // (layer) recent tokens never evicted

  H2o(PolicyTerm t, AttentionContext ctx) {
    ModelConfig c = ctx.config();
    heavy = t.doubleParam("heavy");
    recent = t.doubleParam("recent");
    heads = c.numHeads();
    kvHeads = c.numKvHeads();
    d = c.headDim();
    group = c.group();
    acc = new float[c.numLayers()][];
    budget = new int[c.numLayers()];
    recentN = new int[c.numLayers()];
    Arrays.fill(budget, -1);
  }

  @Override
  public void observe(int layer, float[] q, int n, int pos0, KvCache kv, AttentionContext ctx) {
    if (acc[layer] == null) acc[layer] = new float[kvHeads * kv.capacity];
    accumulate(layer, q, n, pos0, kv, ctx);
  }

  /**
   * The accumulated scores of the prefix's slots: each is a sum over the prefix's queries alone (a
   * query sees only earlier keys), added row by row, so a fork that goes on adding its own rows sums
   * in the same order as the whole prompt alone.
   */
  @Override
  public ComposedPolicy.KeptState keepState(int tokens) {
    float[][] kept = new float[acc.length][];
    for (int l = 0; l < acc.length; l++) {
      if (acc[l] == null) continue;
      int cap = acc[l].length / kvHeads;
      kept[l] = new float[kvHeads * tokens];
      for (int g = 0; g < kvHeads; g++) System.arraycopy(acc[l], g * cap, kept[l], g * tokens, tokens);
    }
    return new KeptScores(kept, tokens, (long) acc.length * kvHeads * tokens * 4);
  }

  @Override
  public void adoptState(ComposedPolicy.KeptState state, KvCache kv) {
    KeptScores k = (KeptScores) state;
    for (int l = 0; l < acc.length; l++) {
      if (k.acc[l] == null) continue;
      acc[l] = new float[kvHeads * kv.capacity];
      for (int g = 0; g < kvHeads; g++) System.arraycopy(k.acc[l], g * k.tokens, acc[l], g * kv.capacity, k.tokens);
    }
  }

  /** (layer) → (kvHeads, tokens) accumulated scores of a kept prefix. */
  private record KeptScores(float[][] acc, int tokens, long bytes) implements ComposedPolicy.KeptState {}

  /** acc[g, j] += Σ over the n query rows and g's query heads of softmax(q·k/√d + bias)[j], causal. */
  private void accumulate(int layer, float[] q, int n, int pos0, KvCache kv, AttentionContext ctx) {
    float[] a = acc[layer];
    int end = kv.length(layer), before = end - n, cap = kv.capacity, kvDim = kv.kvDim;
    float[] keys = kv.ropedKeys[layer], bias = kv.logitBias[layer];
    float scale = ctx.scale();
    // one task per KV head: its query heads' rows accumulate into its own row of acc, no races
    ctx.pool().forRange(kvHeads, (from, to) -> {
      RotationScratch rs = RotationScratch.of(d);
      float[] qr = rs.qr, cos = rs.cos, sin = rs.sin, s = new float[end];
      for (int g = from; g < to; g++) {
        for (int i = 0; i < n; i++) {
          ctx.rope().angles(pos0 + i, cos, sin);
          int visible = before + i + 1;
          for (int h = g * group; h < (g + 1) * group; h++) {
            System.arraycopy(q, (i * heads + h) * d, qr, 0, d);
            ctx.rope().apply(qr, 0, 1, cos, sin);
            for (int j = 0; j < visible; j++) {
              s[j] = CpuOps.dot(qr, 0, keys, j * kvDim + g * d, d) * scale + (bias == null ? 0 : bias[j * heads + h]);
            }
            CpuOps.softmax(s, 0, visible);
            for (int j = 0; j < visible; j++) a[g * cap + j] += s[j];
          }
        }
      }
    });
  }

  @Override
  public void compress(KvCache kv, AttentionContext ctx) {
    for (int layer = 0; layer < kv.layers; layer++) {
      int n = kv.length(layer);
      int rec = (int) Math.round(recent * n), hh = (int) Math.round(heavy * n);
      if (hh + rec >= n || acc[layer] == null) {
        acc[layer] = null; // never over budget: nothing to track
        continue;
      }
      int older = n - rec;
      int[][] keep = new int[kvHeads][hh + rec];
      long[] work = new long[older];
      for (int g = 0; g < kvHeads; g++) {
        TopK.select(acc[layer], g * kv.capacity, older, hh, work, keep[g], 0, 0);
        for (int i = 0; i < rec; i++) keep[g][hh + i] = older + i;
      }
      kv.retain(layer, keep, hh + rec);
      compactScores(layer, keep, hh + rec, kv.capacity);
      budget[layer] = hh + rec;
      recentN[layer] = rec;
    }
  }

  @Override
  public boolean afterDecode(int layer, float[] q, int pos, KvCache kv, AttentionContext ctx) {
    if (budget[layer] < 0) return false;
    accumulate(layer, q, 1, pos, kv, ctx);
    int n = kv.length(layer);
    if (n <= budget[layer]) return false;
    int cap = kv.capacity, older = n - recentN[layer];
    int[][] keep = new int[kvHeads][n - 1];
    for (int g = 0; g < kvHeads; g++) {
      int victim = 0;
      for (int j = 1; j < older; j++) if (acc[layer][g * cap + j] < acc[layer][g * cap + victim]) victim = j;
      for (int j = 0, o = 0; j < n; j++) if (j != victim) keep[g][o++] = j;
    }
    kv.retain(layer, keep, n - 1);
    compactScores(layer, keep, n - 1, cap);
    return true;
  }

  /** Moves each KV head's scores with its kept slots, as {@link KvCache#retain} moved the tokens. */
  private void compactScores(int layer, int[][] keep, int count, int cap) {
    float[] a = acc[layer];
    for (int g = 0; g < kvHeads; g++) {
      for (int i = 0; i < count; i++) a[g * cap + i] = a[g * cap + keep[g][i]];
      Arrays.fill(a, g * cap + count, (g + 1) * cap, 0f);
    }
  }
}
