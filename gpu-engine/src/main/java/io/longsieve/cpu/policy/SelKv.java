package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicyTerm;
import java.util.Arrays;

/**
 * SelKV: KV compression after prefill by selection and selective merging, as its method write-up
 * describes it (seed 004; research/algorithms.md §3.2; no public code exists). Per layer and KV
 * head g, with N cached tokens and budget B = max(sinks + window, round(ratio · N)):
 * <ol>
 *   <li>attention a[h, j]: softmax probability of slot j summed over the last {@code window} prompt
 *       queries (the observation window), per query head;</li>
 *   <li>score s_h[j] = a[h, j] · ‖v_j‖₁ (VATP); sinks and the last window slots are always kept;</li>
 *   <li>GQA union: each query head of g proposes its top B − sinks − window middle tokens; the
 *       union is ranked by Σ_h s_h (ties to the lower slot) and trimmed to that many;</li>
 *   <li>routing, gated merge and compensation ({@link SelKvMerge}): every dropped token goes to
 *       the most attended selected token of its position bucket ({@code bucket} positions; the
 *       nearest selected token when the bucket has none), gate g_i = max(cos(v_i, v_t), 0) on the
 *       values, v'_t = (A_t·v_t + Σ g_i·A_i·v_i) / (A_t + Σ g_i·A_i) with A the group's window
 *       attention (keys too with {@code merge=kv}, re-rotated at t's position), and per query head
 *       h a logit bias α·log R_{h,t}, R_{h,t} = (a_{h,t} + Σ g_i·a_{h,i}) / a_{h,t};</li>
 *   <li>no RoPE re-placement: kept tokens keep their original positions (the seed disables it for
 *       long contexts).</li>
 * </ol>
 * {@code merge=off} evicts without merging or bias (the selection alone). {@code pool > 1}
 * avg-pools each head's score over neighbouring slots before step 3, as SnapKV pools its votes, so
 * a kept token brings its neighbours; the seed's is 1. {@code gate > 0} (a CPU-only diagnostic, not
 * the seed's, which has no threshold) merges a routed token only when its value cosine reaches it;
 * the others are evicted without adding value or mass.
 */
final class SelKv implements ComposedPolicy.Kv {

  private final double ratio, alpha, gateMin;
  private final int sinks, window, pool, bucket;
  private final String merge;
  private final ObservationWindow obs;
  private final int heads, kvHeads, d, group;
  private float[] attn = new float[0]; // (heads, N) observation-window attention

  SelKv(PolicyTerm t, AttentionContext ctx) {
    ModelConfig c = ctx.config();
    ratio = t.doubleParam("ratio");
    alpha = t.doubleParam("alpha");
    gateMin = t.doubleParam("gate");
    sinks = t.intParam("sinks");
    window = Math.max(1, t.intParam("window"));
    pool = Math.max(1, t.intParam("pool"));
    bucket = t.intParam("bucket");
    merge = t.text("merge");
    obs = new ObservationWindow(window, c);
    heads = c.numHeads();
    kvHeads = c.numKvHeads();
    d = c.headDim();
    group = c.group();
  }

  @Override
  public void observe(int layer, float[] q, int n, int pos0, KvCache kv, AttentionContext ctx) {
    obs.observe(layer, q, n);
  }

  @Override
  public void compress(KvCache kv, AttentionContext ctx) {
    for (int l = 0; l < kv.layers; l++) {
      if (ctx.config().window(l) > 0) continue;  // a sliding-window layer stays whole (ComposedPolicy)
      compressLayer(l, kv, ctx);
    }
  }

  void compressLayer(int layer, KvCache kv, AttentionContext ctx) {
    int n = kv.length(layer);
    int win = Math.min(window, obs.count(layer));
    int budget = (int) Math.max((long) sinks + win, Math.round(ratio * n));
    if (budget >= n) return;
    if (attn.length < heads * n) attn = new float[heads * n];
    obs.attention(layer, kv, ctx, attn);
    int mid = n - sinks - win, pick = budget - sinks - win;
    int[][] keep = new int[kvHeads][budget];
    float[] bias = merge.equals("off") ? null : kv.logitBias(layer);
    ctx.pool().forRange(kvHeads, (from, to) -> {
      float[] vnorm = new float[n], raw = new float[mid], score = pool > 1 ? new float[mid] : raw, sum = new float[mid];
      long[] work = new long[mid];
      int[] prop = new int[pick];
      boolean[] inUnion = new boolean[mid];
      for (int g = from; g < to; g++) {
        float[] values = kv.values[layer];
        for (int j = 0; j < n; j++) {
          float s = 0;
          for (int e = 0; e < d; e++) s += Math.abs(values[j * kv.kvDim + g * d + e]);
          vnorm[j] = s;
        }
        Arrays.fill(sum, 0f);
        Arrays.fill(inUnion, false);
        for (int h = g * group; h < (g + 1) * group; h++) {
          for (int j = 0; j < mid; j++) raw[j] = attn[h * n + sinks + j] * vnorm[sinks + j];
          if (pool > 1) TokenSparseAttention.avgPool(raw, 0, mid, pool, score);
          for (int j = 0; j < mid; j++) sum[j] += score[j];
          TopK.select(score, 0, mid, pick, work, prop, 0, 0);
          for (int i = 0; i < pick; i++) inUnion[prop[i]] = true;
        }
        for (int j = 0; j < mid; j++) if (!inUnion[j]) sum[j] = Float.NEGATIVE_INFINITY;
        int[] kg = keep[g];
        for (int i = 0; i < sinks; i++) kg[i] = i;
        TopK.select(sum, 0, mid, pick, work, kg, sinks, sinks);
        for (int i = 0; i < win; i++) kg[sinks + pick + i] = n - win + i;
        if (bias != null) merge(layer, g, n, kg, pick, kv, ctx, bias);
      }
    });
    kv.retain(layer, keep, budget);
  }

  /** Stages 3-5 for KV head g, whose kept slots kg (ascending) are sinks ++ pick selected ++ window. */
  private void merge(int layer, int g, int n, int[] kg, int pick, KvCache kv, AttentionContext ctx, float[] bias) {
    int[] position = new int[n];
    for (int j = 0; j < n; j++) position[j] = kv.position(layer, j, g);
    int[] target = SelKvMerge.targets(n, kg, sinks, sinks + pick, groupMass(g, n), position, bucket);
    float[] keys = merge.equals("kv") ? kv.keys[layer] : null;
    boolean[] keyChanged = SelKvMerge.apply(g, n, kg, target, attn, heads, group, kv.values[layer], keys, kv.kvDim, d,
        alpha, gateMin, bias);
    float[] cos = new float[d / 2], sin = new float[d / 2];
    for (int t = 0; t < kg.length; t++) {
      if (!keyChanged[t]) continue;
      int o = kg[t] * kv.kvDim + g * d;
      System.arraycopy(kv.keys[layer], o, kv.ropedKeys[layer], o, d);
      ctx.rope().angles(position[kg[t]], cos, sin);
      ctx.rope().apply(kv.ropedKeys[layer], o, 1, cos, sin);
    }
  }

  /** (n) the observation attention of KV head g's query heads, summed. */
  private float[] groupMass(int g, int n) {
    float[] m = new float[n];
    for (int h = g * group; h < (g + 1) * group; h++) for (int j = 0; j < n; j++) m[j] += attn[h * n + j];
    return m;
  }
}
