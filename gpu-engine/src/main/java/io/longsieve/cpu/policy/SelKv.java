package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicyTerm;
import java.util.Arrays;

/**
 * SelKV: KV compression after prefill by selection and gated merging (reconstructed spec, issue #3
 * §3 and research/algorithms.md §3.2; no public code exists). Per layer and KV head g, with N
 * cached tokens and budget B = max(sinks + window, round(ratio · N)):
 * <ol>
 *   <li>attention a[h, j]: softmax probability of slot j summed over the last {@code window} prompt
 *       queries (the observation window), per query head;</li>
 *   <li>score s_h[j] = a[h, j] · ‖v_j‖₁; sinks and the last window slots are always kept;</li>
 *   <li>GQA union: each query head of g proposes its top B − sinks − window middle tokens; the
 *       union is ranked by Σ_h s_h (ties to the lower slot) and trimmed to that many;</li>
 *   <li>every dropped token i merges into the kept slot t with the highest cosine of pre-RoPE keys,
 *       gate g_i = max(cos, 0): v'_t = (v_t + Σ g_i v_i) / (1 + Σ g_i) (keys too with
 *       {@code merge=kv}, re-rotated at t's position);</li>
 *   <li>slot t's logit gets α · log R_t with R_t = (a_t + Σ a_i) / a_t, a = Σ_h∈g a[h, ·]: the
 *       prefill attention mass of the tokens t now stands for (proportional attention: with
 *       identical merged tokens and α = 1 attention is unchanged).</li>
 * </ol>
 * {@code merge=off} evicts without merging or bias (the selection alone). {@code pool > 1}
 * avg-pools each head's score over neighbouring slots before step 3, as SnapKV pools its votes, so
 * a kept token brings its neighbours (a multi-token fact survives whole); the spec's default is 1.
 * {@code gate > 0} (a CPU-only diagnostic) merges a dropped token only when its best cosine reaches
 * it; the others are evicted without adding value or mass; the spec's default is 0.
 */
final class SelKv implements ComposedPolicy.Kv {

  private final double ratio, alpha, gateMin;
  private final int sinks, window, pool;
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
        if (bias != null) merge(layer, g, n, kg, kv, ctx, bias);
      }
    });
    kv.retain(layer, keep, budget);
  }

  /** Merges every slot of KV head g that is not in kg (ascending) into its most similar kept slot. */
  private void merge(int layer, int g, int n, int[] kg, KvCache kv, AttentionContext ctx, float[] bias) {
    int kvDim = kv.kvDim, b = kg.length;
    float[] keys = kv.keys[layer], values = kv.values[layer];
    float[] unitKept = new float[b * d];    // (kept, headDim) normalised pre-RoPE keys
    for (int t = 0; t < b; t++) unit(keys, kg[t] * kvDim + g * d, unitKept, t * d);
    float[] gateSum = new float[b];          // (kept) Σ g_i
    float[] massSum = new float[b];          // (kept) Σ a_i
    float[] vAcc = new float[b * d];         // (kept, headDim) Σ g_i v_i
    float[] kAcc = merge.equals("kv") ? new float[b * d] : null;
    float[] u = new float[d];
    int next = 0;
    for (int i = 0; i < n; i++) {
      if (next < b && kg[next] == i) {
        next++;
        continue;
      }
      unit(keys, i * kvDim + g * d, u, 0);
      int best = 0;
      float bestCos = Float.NEGATIVE_INFINITY;
      for (int t = 0; t < b; t++) {
        float cs = CpuOps.dot(u, 0, unitKept, t * d, d);
        if (cs > bestCos) {
          bestCos = cs;
          best = t;
        }
      }
      if (gateMin > 0 && bestCos < gateMin) continue; // diagnostic gate: evicted, not merged
      float gate = Math.max(bestCos, 0f);
      gateSum[best] += gate;
      massSum[best] += groupMass(i, g, n);
      CpuOps.axpy(gate, values, i * kvDim + g * d, vAcc, best * d, d);
      if (kAcc != null) CpuOps.axpy(gate, keys, i * kvDim + g * d, kAcc, best * d, d);
    }
    float[] cos = new float[d / 2], sin = new float[d / 2];
    for (int t = 0; t < b; t++) {
      int slot = kg[t], o = slot * kvDim + g * d;
      if (gateSum[t] > 0) {
        float inv = 1f / (1f + gateSum[t]);
        for (int e = 0; e < d; e++) values[o + e] = (values[o + e] + vAcc[t * d + e]) * inv;
        if (kAcc != null) {
          for (int e = 0; e < d; e++) keys[o + e] = (keys[o + e] + kAcc[t * d + e]) * inv;
          System.arraycopy(keys, o, kv.ropedKeys[layer], o, d);
          ctx.rope().angles(kv.position(layer, slot, g), cos, sin);
          ctx.rope().apply(kv.ropedKeys[layer], o, 1, cos, sin);
        }
      }
      if (massSum[t] > 0 && alpha != 0) {
        double at = Math.max(groupMass(slot, g, n), 1e-30);
        bias[slot * kv.nKvHeads() + g] += (float) (alpha * Math.log((at + massSum[t]) / at));
      }
    }
  }

  private float groupMass(int slot, int g, int n) {
    float s = 0;
    for (int h = g * group; h < (g + 1) * group; h++) s += attn[h * n + slot];
    return s;
  }

  private void unit(float[] src, int so, float[] dst, int dOff) {
    double ss = 0;
    for (int e = 0; e < d; e++) ss += (double) src[so + e] * src[so + e];
    float inv = ss > 0 ? (float) (1 / Math.sqrt(ss)) : 0f;
    for (int e = 0; e < d; e++) dst[dOff + e] = src[so + e] * inv;
  }
}
