package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cuda.Gpu;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyTerm;
import java.util.Arrays;
import java.util.Comparator;
import java.util.stream.IntStream;

/**
 * An independent double-precision model of what SelKV and SnapKV keep (cpu/policy/SelKv, SnapKv,
 * ObservationWindow, TopK), written from their Javadoc, used to tell a rounding flip from a bug:
 * besides the keep set per KV head it marks every slot whose keep decision rests on a score within
 * a relative {@code eps} of the cut-off (the k-th / (k+1)-th boundary) of any top-k it went
 * through. Two implementations that round differently (the GPU scores bf16 rotated keys, the CPU
 * f32 ones) may disagree on exactly those slots and on no other. A prompt that starts at position 0
 * in an empty cache: slot = position.
 */
final class KvKeepModel {

  /** keep: (nKv) → kept positions ascending; nearTie: (nKv, n) decisions within eps of a cut-off. */
  record Selection(int[][] keep, boolean[][] nearTie) {}

  private KvKeepModel() {}

  /**
   * The model of spec's kv term per layer for a cache that holds exactly the prompt (total
   * tokens, every layer) before compression; qAll (layer) → (total, qDim) the prompt's queries
   * before RoPE. bf16Keys: score with the rotated keys rounded to bf16, as the GPU stores them
   * (the CPU keeps f32). Null unless the term is selkv or snapkv.
   */
  static Selection[] of(PolicySpec spec, ModelConfig c, Rope rope, KvCache kv, float[][] qAll, int total, double eps,
                        boolean bf16Keys) {
    PolicyTerm t = spec.kv();
    boolean sel = t.name().equals("selkv");
    if (!sel && !t.name().equals("snapkv")) return null;
    int win = Math.min(Math.max(1, t.intParam("window")), total), qDim = c.qDim();
    Selection[] out = new Selection[c.numLayers()];
    for (int l = 0; l < out.length; l++) {
      if (kv.length(l) != total) throw new IllegalArgumentException("layer " + l + " holds " + kv.length(l));
      float[] rows = Arrays.copyOfRange(qAll[l], (total - win) * qDim, total * qDim);
      float[] keys = kv.ropedKeys[l];
      if (bf16Keys) {
        keys = Arrays.copyOf(keys, total * c.kvDim());
        for (int i = 0; i < keys.length; i++) keys[i] = Gpu.roundBf16(keys[i]);
      }
      double[] attn = attention(c, rope, rows, win, keys, total);
      out[l] = sel ? selKv(t, c, attn, kv.values[l], total, win, eps) : snapKv(t, c, attn, total, win, eps);
    }
    return out;
  }

  /**
   * Asserts that every position kept on one side only (want, got ascending) is a near-tie;
   * positions past near.length (tokens appended after the compression) must agree. Returns the
   * number of want's positions that got lacks.
   */
  static int assertFlipsAreTies(int[] want, int[] got, boolean[] near, String what) {
    int max = 0;
    for (int p : want) max = Math.max(max, p + 1);
    for (int p : got) max = Math.max(max, p + 1);
    boolean[] inWant = new boolean[max], inGot = new boolean[max];
    for (int p : want) inWant[p] = true;
    for (int p : got) inGot[p] = true;
    int missing = 0;
    for (int p = 0; p < max; p++) {
      if (inWant[p] == inGot[p]) continue;
      if (inWant[p]) missing++;
      assertTrue(p < near.length && near[p], what + ": position " + p + " kept only by "
          + (inWant[p] ? "the reference" : "the implementation") + " though its scores are not tied at the cut-off");
    }
    return missing;
  }

  /**
   * SelKV's merge, judged per kept position of one KV head: unstable where the kept token's
   * merged-in set may differ between the two keep lists (reference, got: positions &lt; total
   * ascending, the first {@code sinks} and last {@code win} positions kept by rule, slot =
   * position). The routing (cpu/policy/SelKvMerge) sends a dropped token to the most attended
   * selected token of its position bucket, else to the nearest selected one: a dropped token whose
   * target differs between the lists, whose bucket's two most attended selected tokens lie within a
   * relative massEps of each other on either side (bf16 keys move the masses), or that is dropped by
   * one list only, makes its targets unstable. Every other kept token merges exactly the same
   * dropped tokens on both sides (the gate and the weights are continuous in the inputs).
   *
   * @param mass (total) the KV head's observation attention summed over its query heads (fp64 model)
   */
  static boolean[] mergeUnstable(int total, int sinks, int win, int bucket, double[] mass, int[] reference, int[] got,
                                 double massEps) {
    int[][] lists = {reference, got};
    boolean[][] kept = new boolean[2][total];
    int[][] target = new int[2][total], second = new int[2][total];
    for (int side = 0; side < 2; side++) {
      java.util.List<Integer> picks = new java.util.ArrayList<>();
      for (int p : lists[side]) {
        if (p >= total) continue;
        kept[side][p] = true;
        if (p >= sinks && p < total - win) picks.add(p);
      }
      for (int i = 0; i < total; i++) {
        target[side][i] = second[side][i] = -1;
        if (kept[side][i] || picks.isEmpty()) continue;
        int best = -1, next = -1;
        for (int p : picks) {
          if (p / bucket != i / bucket) continue;
          if (best < 0 || mass[p] > mass[best]) {
            next = best;
            best = p;
          } else if (next < 0 || mass[p] > mass[next]) {
            next = p;
          }
        }
        if (best >= 0) {
          target[side][i] = best;
          if (next >= 0 && mass[best] - mass[next] <= massEps * mass[best]) second[side][i] = next;
          continue;
        }
        for (int p : picks) if (best < 0 || Math.abs(p - i) < Math.abs(best - i)) best = p;
        target[side][i] = best;
      }
    }
    boolean[] unstable = new boolean[total];
    for (int i = 0; i < total; i++) {
      boolean dr = !kept[0][i], dg = !kept[1][i];
      if (dr && dg && target[0][i] == target[1][i] && second[0][i] < 0 && second[1][i] < 0) continue;
      for (int side = 0; side < 2; side++) {
        if (kept[side][i]) continue;
        if (target[side][i] >= 0) unstable[target[side][i]] = true;
        if (second[side][i] >= 0) unstable[second[side][i]] = true;
      }
    }
    return unstable;
  }

  /**
   * attn (heads, n): Σ over the cnt window rows (pre-RoPE queries (cnt, qDim), oldest first, row r
   * at slot and position n − cnt + r, causal) of softmax(q·k/√d) over the rotated keys (n, kvDim).
   */
  static double[] attention(ModelConfig c, Rope rope, float[] qRows, int cnt, float[] ropedKeys, int n) {
    int heads = c.numHeads(), d = c.headDim(), kvDim = c.kvDim(), qDim = c.qDim(), group = c.group();
    double scale = 1 / Math.sqrt(d);
    double[] attn = new double[heads * n], s = new double[n];
    float[] q = new float[qDim];
    for (int r = 0; r < cnt; r++) {
      int slot = n - cnt + r;
      System.arraycopy(qRows, r * qDim, q, 0, qDim);
      rope.rotate(q, 0, heads, slot);
      for (int h = 0; h < heads; h++) {
        int kvh = h / group;
        double max = Double.NEGATIVE_INFINITY, sum = 0;
        for (int j = 0; j <= slot; j++) {
          double dot = 0;
          for (int e = 0; e < d; e++) dot += (double) q[h * d + e] * ropedKeys[j * kvDim + kvh * d + e];
          s[j] = dot * scale;
          max = Math.max(max, s[j]);
        }
        for (int j = 0; j <= slot; j++) sum += s[j] = Math.exp(s[j] - max);
        for (int j = 0; j <= slot; j++) attn[h * n + j] += s[j] / sum;
      }
    }
    return attn;
  }

  /** SnapKV: group-summed votes on the prefix, avg-pooled, top cap − win per KV head, plus the window. */
  static Selection snapKv(PolicyTerm t, ModelConfig c, double[] attn, int n, int win, double eps) {
    int nKv = c.numKvHeads(), group = c.group(), pool = t.intParam("pool");
    double ratio = t.doubleParam("ratio");
    int cap = Math.max(ratio > 0 ? (int) Math.round(ratio * n) : t.intParam("capacity"), win);
    int prefix = n - win, pick = cap - win;
    int[][] keep = new int[nKv][];
    boolean[][] near = new boolean[nKv][n];
    for (int g = 0; g < nKv; g++) {
      double[] vote = new double[prefix];
      for (int h = g * group; h < (g + 1) * group; h++) for (int j = 0; j < prefix; j++) vote[j] += attn[h * n + j];
      if (pool > 1) vote = avgPool(vote, pool);
      boolean[] in = topK(vote, pick, near[g], 0, eps);
      keep[g] = lists(in, 0, n, prefix);
    }
    return new Selection(keep, near);
  }

  /**
   * SelKV: per query head a·‖v‖₁ on the middle slots (optionally avg-pooled), each head's top pick
   * proposals, their union ranked by the group sum, plus sinks and window.
   */
  static Selection selKv(PolicyTerm t, ModelConfig c, double[] attn, float[] values, int n, int win, double eps) {
    int nKv = c.numKvHeads(), group = c.group(), d = c.headDim(), kvDim = c.kvDim();
    int sinks = t.intParam("sinks"), pool = Math.max(1, t.intParam("pool"));
    int budget = (int) Math.max((long) sinks + win, Math.round(t.doubleParam("ratio") * n));
    int mid = n - sinks - win, pick = budget - sinks - win;
    int[][] keep = new int[nKv][];
    boolean[][] near = new boolean[nKv][n];
    for (int g = 0; g < nKv; g++) {
      double[] sum = new double[mid];
      boolean[] union = new boolean[mid];
      for (int h = g * group; h < (g + 1) * group; h++) {
        double[] score = new double[mid];
        for (int j = 0; j < mid; j++) {
          double vn = 0;
          for (int e = 0; e < d; e++) vn += Math.abs(values[(sinks + j) * kvDim + g * d + e]);
          score[j] = attn[h * n + sinks + j] * vn;
        }
        if (pool > 1) score = avgPool(score, pool);
        for (int j = 0; j < mid; j++) sum[j] += score[j];
        boolean[] prop = topK(score, pick, near[g], sinks, eps);
        for (int j = 0; j < mid; j++) union[j] |= prop[j];
      }
      for (int j = 0; j < mid; j++) if (!union[j]) sum[j] = Double.NEGATIVE_INFINITY;
      keep[g] = lists(topK(sum, pick, near[g], sinks, eps), sinks, n, n - win);
    }
    return new Selection(keep, near);
  }

  /** torch avg_pool1d(kernel, stride 1, padding kernel / 2, zeros counted), truncated to n. */
  static double[] avgPool(double[] v, int kernel) {
    int n = v.length, pad = kernel / 2;
    double[] out = new double[n];
    for (int o = 0; o < n; o++) {
      double s = 0;
      for (int j = o - pad; j < o - pad + kernel; j++) if (j >= 0 && j < n) s += v[j];
      out[o] = s / kernel;
    }
    return out;
  }

  /**
   * The k largest (ties to the lower index); marks near[base + j] where score j lies within eps
   * (relative) of the boundary between the k-th and (k+1)-th largest.
   */
  static boolean[] topK(double[] score, int k, boolean[] near, int base, double eps) {
    int n = score.length;
    boolean[] in = new boolean[n];
    if (k >= n) {
      Arrays.fill(in, true);
      return in;
    }
    if (k <= 0) return in;
    Integer[] order = IntStream.range(0, n).boxed().toArray(Integer[]::new);
    Arrays.sort(order, Comparator.<Integer>comparingDouble(i -> -score[i]).thenComparingInt(i -> i));
    for (int i = 0; i < k; i++) in[order[i]] = true;
    double lo = score[order[k]], hi = score[order[k - 1]];
    if (Double.isInfinite(lo)) return in;  // the rest is masked out: nothing competes with the k-th
    double margin = eps * Math.max(Math.abs(hi), Math.abs(lo));
    for (int j = 0; j < n; j++) {
      if (score[j] >= lo - margin && score[j] <= hi + margin) near[base + j] = true;
    }
    return in;
  }

  /** Slots below lo, at or above hi, and lo + j for in[j], ascending. */
  private static int[] lists(boolean[] in, int lo, int n, int hi) {
    return IntStream.range(0, n).filter(s -> s < lo || s >= hi || in[s - lo]).toArray();
  }
}
