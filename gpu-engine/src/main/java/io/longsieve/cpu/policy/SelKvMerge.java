package io.longsieve.cpu.policy;

/**
 * SelKV's stages 3 to 5 (seed 004, research/algorithms.md §3.2) for one layer and KV head, after
 * the selection ({@link SelKv}) chose the kept slots. Plain loops: the reference the GPU twin
 * (cuda/kv/kv_merge.cu) is held to.
 * <ol>
 *   <li>routing ({@link #targets}): a dropped token goes to a kept token of its position bucket
 *       (positions [b·B, (b+1)·B), B = {@code bucket}): the one the observation window attended most
 *       (group mass, ties to the lower slot); when its bucket holds no kept token, to the nearest
 *       kept token by position (ties to the earlier). Only the selected middle tokens are targets:
 *       sinks and the recent window are kept by rule, not by score, and stay exactly as they were
 *       (the window is the question the answer is read from; a sink parks attention). With no
 *       selected token at all every dropped token is evicted;</li>
 *   <li>gate ({@link #gate}): g_i = max(cos(v_i, v_t), 0) on the VALUE vectors (0 for a zero
 *       vector): similar values merge, orthogonal ones are dropped;</li>
 *   <li>merged value: v'_t = (A_t·v_t + Σ g_i·A_i·v_i) / (A_t + Σ g_i·A_i), A the observation
 *       window's attention summed over the KV head's query heads (the value is shared by them);
 *       keys likewise with {@code merge=kv} (not in the seed);</li>
 *   <li>compensation per QUERY head h: R_{h,t} = (a_{h,t} + Σ g_i·a_{h,i}) / a_{h,t} (a token with
 *       g = 0 adds nothing), logit bias α·log R_{h,t}. With exact copies of t merged in (g = 1, the
 *       same logits), α = 1 reproduces the attention of the uncompressed cache.</li>
 * </ol>
 */
final class SelKvMerge {
  private SelKvMerge() {}

  /**
   * Stage 3. For every slot i &lt; n of one KV head: the index into {@code kept} of the kept token
   * dropped slot i merges into, or -1 (i is kept, or there is no target).
   *
   * @param kept     the kept slots, ascending (sinks, selected, window)
   * @param from     kept[from .. to) are the selected tokens, the only targets
   * @param mass     (n) the group's observation-window attention per slot
   * @param position (n) the original position of each slot, ascending
   */
  static int[] targets(int n, int[] kept, int from, int to, float[] mass, int[] position, int bucket) {
    int[] target = new int[n];
    java.util.Arrays.fill(target, -1);
    if (from >= to) return target;
    // runBest[j]: the most attended selected token of j's bucket run (the selected tokens are ascending)
    int[] runBest = new int[to];
    for (int j = from; j < to; ) {
      int b = Math.floorDiv(position[kept[j]], bucket), end = j, best = j;
      while (end < to && Math.floorDiv(position[kept[end]], bucket) == b) {
        if (mass[kept[end]] > mass[kept[best]]) best = end;
        end++;
      }
      for (int x = j; x < end; x++) runBest[x] = best;
      j = end;
    }
    boolean[] isKept = new boolean[n];
    for (int s : kept) isKept[s] = true;
    for (int i = 0; i < n; i++) {
      if (isKept[i]) continue;
      int p = position[i], b = Math.floorDiv(p, bucket);
      int first = firstAtLeast(kept, from, to, position, b * bucket);  // the first selected token of i's bucket, if any
      if (first < to && Math.floorDiv(position[kept[first]], bucket) == b) {
        target[i] = runBest[first];
        continue;
      }
      int after = firstAtLeast(kept, from, to, position, p + 1), before = after - 1;
      if (before >= from) before = firstAtLeast(kept, from, to, position, position[kept[before]]);  // the earliest slot there
      if (after >= to) target[i] = before;
      else if (before < from) target[i] = after;
      else target[i] = p - position[kept[before]] <= position[kept[after]] - p ? before : after;
    }
    return target;
  }

  /** The first j in [from, to) with position[kept[j]] ≥ p (to when none): binary search, positions ascending. */
  private static int firstAtLeast(int[] kept, int from, int to, int[] position, long p) {
    int lo = from, hi = to;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (position[kept[mid]] >= p) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  /**
   * Stage 4's gate max(cos(a, b), 0) of two head vectors (values), the norms and dot in double;
   * 0 when either is zero. {@code gateMin} &gt; 0 (a CPU diagnostic): 0 below it as well.
   */
  static float gate(float[] x, int xo, float[] y, int yo, int d, double gateMin) {
    double xy = 0, xx = 0, yy = 0;
    for (int e = 0; e < d; e++) {
      xy += (double) x[xo + e] * y[yo + e];
      xx += (double) x[xo + e] * x[xo + e];
      yy += (double) y[yo + e] * y[yo + e];
    }
    if (xx == 0 || yy == 0) return 0f;
    double cos = xy / Math.sqrt(xx * yy);
    if (gateMin > 0 && cos < gateMin) return 0f;
    return (float) Math.max(cos, 0);
  }

  /**
   * Stages 4 and 5 for KV head g: merges every routed slot into its target's value (and key) in
   * place, and adds α·log R_{h,t} to the bias of each target slot and query head h of the group.
   * Values are rewritten only after every gate was computed on the original values.
   *
   * @param attn   (heads, n) observation-window attention
   * @param target stage 3's result for this KV head
   * @param keys   (capacity, kvDim) pre-RoPE keys, merged too when non-null ({@code merge=kv})
   * @param bias   (capacity, heads) the layer's logit bias
   * @return (kept) whether each kept slot's key changed (merge=kv: the caller re-rotates it)
   */
  static boolean[] apply(int g, int n, int[] kept, int[] target, float[] attn, int heads, int group, float[] values,
                         float[] keys, int kvDim, int d, double alpha, double gateMin, float[] bias) {
    int b = kept.length;
    float[] groupMass = new float[n];       // (n) A: Σ over g's query heads
    for (int h = g * group; h < (g + 1) * group; h++) for (int j = 0; j < n; j++) groupMass[j] += attn[h * n + j];
    float[] weight = new float[b];          // (kept) Σ g_i·A_i
    float[] vAcc = new float[b * d];        // (kept, headDim) Σ g_i·A_i·v_i
    float[] kAcc = keys == null ? null : new float[b * d];
    float[] headMass = new float[b * group]; // (kept, group) Σ g_i·a_{h,i}
    int off = g * d;
    for (int i = 0; i < n; i++) {
      int t = target[i];
      if (t < 0) continue;
      float gi = gate(values, i * kvDim + off, values, kept[t] * kvDim + off, d, gateMin);
      if (gi == 0f) continue;  // dropped: adds neither value nor mass
      float w = gi * groupMass[i];
      weight[t] += w;
      for (int e = 0; e < d; e++) vAcc[t * d + e] += w * values[i * kvDim + off + e];
      if (kAcc != null) for (int e = 0; e < d; e++) kAcc[t * d + e] += w * keys[i * kvDim + off + e];
      for (int r = 0; r < group; r++) headMass[t * group + r] += gi * attn[(g * group + r) * n + i];
    }
    boolean[] keyChanged = new boolean[b];
    for (int t = 0; t < b; t++) {
      int slot = kept[t], o = slot * kvDim + off;
      if (weight[t] > 0) {
        float at = groupMass[slot], inv = 1f / (at + weight[t]);
        for (int e = 0; e < d; e++) values[o + e] = (at * values[o + e] + vAcc[t * d + e]) * inv;
        if (kAcc != null) {
          for (int e = 0; e < d; e++) keys[o + e] = (at * keys[o + e] + kAcc[t * d + e]) * inv;
          keyChanged[t] = true;
        }
      }
      if (alpha == 0) continue;
      for (int r = 0; r < group; r++) {
        float m = headMass[t * group + r];
        if (m <= 0) continue;
        int h = g * group + r;
        double aht = Math.max(attn[h * n + slot], 1e-30);
        bias[slot * heads + h] += (float) (alpha * Math.log((aht + m) / aht));
      }
    }
    return keyChanged;
  }
}
