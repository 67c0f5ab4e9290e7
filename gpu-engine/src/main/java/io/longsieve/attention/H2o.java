package io.longsieve.attention;

import io.longsieve.cpu.CpuOps;
import io.longsieve.cpu.KvCache;
import io.longsieve.model.ModelConfig;
import java.util.Arrays;

/**
 * H2O baseline (FMInference/H2O {@code modify_llama.py}, research/algorithms.md §4): every prompt
 * query's attention probabilities are accumulated per key (the "heavy hitter" score); after prefill
 * each KV head keeps its top {@code heavy} × N accumulated keys of the older part plus the last
 * {@code recent} × N tokens. For GQA the scores of a KV head's query heads are summed.
 *
 * <p>Deviations, named: the official code evicts at every generation step to hold the budget; here
 * eviction runs once after the prompt and generated tokens are kept (outputs are short next to the
 * documents). Accumulating the prompt's attention costs a second pass of dense attention scores
 * over the prompt on the CPU.
 */
final class H2o implements ComposedPolicy.Kv {

  private final double heavy, recent;
  private final int heads, kvHeads, d, group;
  private float[][] acc; // (layer) → (kvHeads, capacity) accumulated attention per key

  H2o(PolicyTerm t, AttentionContext ctx) {
    ModelConfig c = ctx.config();
    heavy = t.doubleParam("heavy");
    recent = t.doubleParam("recent");
    heads = c.numHeads();
    kvHeads = c.numKvHeads();
    d = c.headDim();
    group = c.group();
    acc = new float[c.numLayers()][];
  }

  @Override
  public void observe(int layer, float[] q, int n, int pos0, KvCache kv, AttentionContext ctx) {
    if (acc[layer] == null) acc[layer] = new float[kvHeads * kv.capacity];
    float[] a = acc[layer];
    int end = kv.length(layer), before = end - n, cap = kv.capacity, kvDim = kv.kvDim;
    float[] keys = kv.ropedKeys[layer];
    float scale = ctx.scale();
    // one task per KV head: its query heads' rows accumulate into its own row of acc, no races
    ctx.pool().forRange(kvHeads, (from, to) -> {
      float[] qr = new float[d], cos = new float[d / 2], sin = new float[d / 2], s = new float[end];
      for (int g = from; g < to; g++) {
        for (int i = 0; i < n; i++) {
          ctx.rope().angles(pos0 + i, cos, sin);
          int visible = before + i + 1;
          for (int h = g * group; h < (g + 1) * group; h++) {
            System.arraycopy(q, (i * heads + h) * d, qr, 0, d);
            ctx.rope().apply(qr, 0, 1, cos, sin);
            for (int j = 0; j < visible; j++) s[j] = CpuOps.dot(qr, 0, keys, j * kvDim + g * d, d) * scale;
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
      if (hh + rec >= n || acc[layer] == null) continue;
      int older = n - rec;
      int[][] keep = new int[kvHeads][hh + rec];
      long[] work = new long[older];
      for (int g = 0; g < kvHeads; g++) {
        TopK.select(acc[layer], g * kv.capacity, older, hh, work, keep[g], 0, 0);
        for (int i = 0; i < rec; i++) keep[g][hh + i] = older + i;
      }
      kv.retain(layer, keep, hh + rec);
      acc[layer] = null;
    }
    Arrays.fill(acc, null);
  }
}
