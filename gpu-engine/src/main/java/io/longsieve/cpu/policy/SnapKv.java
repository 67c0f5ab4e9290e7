package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicyTerm;

/**
 * SnapKV baseline (FasterDecoding/SnapKV {@code snapkv_utils.py}, research/algorithms.md §4): after
 * prefill, the last {@code window} prompt queries vote on the prefix keys (softmax probabilities
 * summed over the window), the votes are avg-pooled ({@code pool}, padding pool/2), and each KV
 * head keeps its top capacity − window prefix tokens plus the window. The official code selects
 * per attention head of MHA models; for GQA this engine sums the votes of a KV head's query heads,
 * so one KV slot serves its whole group. Nothing is merged.
 */
final class SnapKv implements ComposedPolicy.Kv {

  private final int window, pool, capacity;
  private final double ratio;
  private final ObservationWindow obs;
  private final int heads, kvHeads, group;
  private float[] attn = new float[0]; // (heads, N)

  SnapKv(PolicyTerm t, AttentionContext ctx) {
    ModelConfig c = ctx.config();
    window = Math.max(1, t.intParam("window"));
    pool = t.intParam("pool");
    capacity = t.intParam("capacity");
    ratio = t.doubleParam("ratio");
    obs = new ObservationWindow(window, c);
    heads = c.numHeads();
    kvHeads = c.numKvHeads();
    group = c.group();
  }

  @Override
  public void observe(int layer, float[] q, int n, int pos0, KvCache kv, AttentionContext ctx) {
    obs.observe(layer, q, n);
  }

  @Override
  public void compress(KvCache kv, AttentionContext ctx) {
    for (int layer = 0; layer < kv.layers; layer++) {
      if (ctx.config().window(layer) > 0) continue;  // a sliding-window layer stays whole (ComposedPolicy)
      int n = kv.length(layer), win = Math.min(window, obs.count(layer));
      int cap = ratio > 0 ? (int) Math.round(ratio * n) : capacity;
      cap = Math.max(cap, win);
      if (n <= cap) continue;
      if (attn.length < heads * n) attn = new float[heads * n];
      obs.attention(layer, kv, ctx, attn);
      int prefix = n - win, pick = cap - win;
      int[][] keep = new int[kvHeads][cap];
      float[] vote = new float[prefix], pooled = new float[prefix];
      long[] work = new long[prefix];
      for (int g = 0; g < kvHeads; g++) {
        java.util.Arrays.fill(vote, 0f);
        for (int h = g * group; h < (g + 1) * group; h++) {
          for (int j = 0; j < prefix; j++) vote[j] += attn[h * n + j];
        }
        float[] v = vote;
        if (pool > 1) {
          TokenSparseAttention.avgPool(vote, 0, prefix, pool, pooled);
          v = pooled;
        }
        TopK.select(v, 0, prefix, pick, work, keep[g], 0, 0);
        for (int i = 0; i < win; i++) keep[g][pick + i] = prefix + i;
      }
      kv.retain(layer, keep, cap);
    }
  }
}
