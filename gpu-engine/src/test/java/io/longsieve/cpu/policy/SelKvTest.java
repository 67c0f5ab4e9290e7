package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.PolicySpec;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * SelKV through its policy object, each stage against a brute-force version of the seed's
 * description (stages 3-5 alone: {@link SelKvMergeTest}): the observation attention, the VATP score
 * and the selection (top per query head, union over the GQA group, trimmed, plus sinks and window),
 * then routing, gated merge and compensation end to end, exactness with copies and a full budget.
 */
class SelKvTest {

  static SelKv policy(Fixture f, String params) {
    return new SelKv(PolicySpec.parse("selkv:" + params).kv(), f.ctx);
  }

  /** a[h][j]: softmax probability summed over the last w rows of q (slots n − w ..), fp64. */
  static double[][] windowAttention(Fixture f, KvCache kv, int layer, float[] q, int w) {
    int heads = f.c.numHeads(), d = f.c.headDim(), n = kv.length(layer), rows = q.length / f.c.qDim();
    double[][] a = new double[heads][n];
    for (int h = 0; h < heads; h++) {
      for (int r = rows - w; r < rows; r++) {
        int slot = n - rows + r;
        float[] qr = f.rotated(q, (r * heads + h) * d, kv.positions[layer][slot]);
        double[] s = new double[slot + 1];
        double max = Double.NEGATIVE_INFINITY, z = 0;
        for (int j = 0; j <= slot; j++) {
          float[] k = f.rotated(kv.keys[layer], j * f.c.kvDim() + (h / f.c.group()) * d, kv.positions[layer][j]);
          for (int e = 0; e < d; e++) s[j] += (double) qr[e] * k[e];
          s[j] /= Math.sqrt(d);
          max = Math.max(max, s[j]);
        }
        for (int j = 0; j <= slot; j++) z += s[j] = Math.exp(s[j] - max);
        for (int j = 0; j <= slot; j++) a[h][j] += s[j] / z;
      }
    }
    return a;
  }

  @Test
  void keptTokensFollowTheScoreAndTheGqaUnion() {
    checkSelection(1);
  }

  @Test
  void pooledScoreKeepsTokensByTheirNeighbourhood() {
    checkSelection(3);
  }

  /** The kept slots against the definition, the score avg-pooled over {@code pool} slots first. */
  private static void checkSelection(int pool) {
    try (Fixture f = new Fixture(31)) {
      int n = 80, sinks = 3, w = 5, budget = 20, pick = budget - sinks - w, d = f.c.headDim();
      KvCache kv = f.cache(96, n);
      float[] q = f.rand(n * f.c.qDim());
      SelKv s = policy(f, "ratio=0.25,sinks=3,window=5,merge=off,pool=" + pool);
      for (int l = 0; l < 2; l++) s.observe(l, q, n, 0, kv, f.ctx);
      double[][] a = windowAttention(f, kv, 0, q, w);
      float[][] valuesBefore = {kv.values[0].clone()};
      s.compress(kv, f.ctx);
      assertEquals(budget, kv.length(0));
      for (int g = 0; g < f.c.numKvHeads(); g++) {
        double[] sum = new double[n];
        boolean[] union = new boolean[n];
        for (int h = g * f.c.group(); h < (g + 1) * f.c.group(); h++) {
          float[] raw = new float[n - sinks - w], score = new float[n - sinks - w];
          for (int j = sinks; j < n - w; j++) {
            double vn = 0;
            for (int e = 0; e < d; e++) vn += Math.abs(valuesBefore[0][j * f.c.kvDim() + g * d + e]);
            raw[j - sinks] = (float) (a[h][j] * vn);
          }
          for (int j = 0; j < raw.length; j++) {       // avg-pool, zero padding, divided by the kernel
            float acc = 0;
            for (int t = j - pool / 2; t < j - pool / 2 + pool; t++) if (t >= 0 && t < raw.length) acc += raw[t];
            score[j] = pool == 1 ? raw[j] : acc / pool;
            sum[sinks + j] += score[j];
          }
          for (int i : TopKTest.bruteForce(score, pick)) union[sinks + i] = true;
        }
        float[] ranked = new float[n - sinks - w];
        for (int j = sinks; j < n - w; j++) ranked[j - sinks] = union[j] ? (float) sum[j] : Float.NEGATIVE_INFINITY;
        List<Integer> expected = new ArrayList<>();
        for (int i = 0; i < sinks; i++) expected.add(i);
        for (int i : TopKTest.bruteForce(ranked, pick)) expected.add(sinks + i);
        for (int i = n - w; i < n; i++) expected.add(i);
        for (int i = 0; i < budget; i++) {
          assertEquals(expected.get(i), kv.position(0, i, g), "kv head " + g + " slot " + i);
          for (int e = 0; e < d; e++) {
            assertEquals(valuesBefore[0][expected.get(i) * f.c.kvDim() + g * d + e], kv.values[0][i * f.c.kvDim() + g * d + e]);
          }
        }
      }
    }
  }

  /**
   * The scoring stage's attention term: ObservationWindow's a[h, j] (the window rows' softmax
   * probabilities summed) against the fp64 definition, the window spanning two prefill calls.
   */
  @Test
  void observationAttentionIsTheWindowSoftmaxSum() {
    try (Fixture f = new Fixture(30)) {
      int n = 70, w = 9;
      KvCache kv = f.cache(80, n);
      float[] q = f.rand(n * f.c.qDim());
      ObservationWindow obs = new ObservationWindow(w, f.c);
      obs.observe(0, java.util.Arrays.copyOf(q, 64 * f.c.qDim()), 64);
      obs.observe(0, java.util.Arrays.copyOfRange(q, 64 * f.c.qDim(), n * f.c.qDim()), n - 64);
      float[] attn = new float[f.c.numHeads() * n];
      obs.attention(0, kv, f.ctx, attn);
      double[][] a = windowAttention(f, kv, 0, q, w);
      for (int h = 0; h < f.c.numHeads(); h++) {
        for (int j = 0; j < n; j++) assertEquals(a[h][j], attn[h * n + j], 1e-5, "head " + h + " slot " + j);
      }
    }
  }

  /**
   * Stages 3-5 end to end through compress: every kept token's value (and key with merge=kv) and
   * every query head's bias against a brute-force routing (buckets of 8 positions), value gate,
   * weighted average and mass ratio computed in fp64 from the definition of the window attention.
   */
  @Test
  void compressMergesAndBiasesAsDefined() {
    checkMerge("merge=values", 0);
    checkMerge("merge=kv", 0);
  }

  /** The diagnostic gate: a routed token whose value cosine is below it is evicted, adding neither value nor mass. */
  @Test
  void gateThresholdMergesOnlyCloseValues() {
    checkMerge("merge=values", 0.3);
  }

  private static void checkMerge(String merge, double gateMin) {
    try (Fixture f = new Fixture(32)) {
      int n = 40, d = f.c.headDim(), kvDim = f.c.kvDim(), heads = f.c.numHeads(), group = f.c.group();
      int sinks = 2, w = 4, bucket = 8, budget = 10, pick = budget - sinks - w;
      KvCache kv = f.cache(48, n);
      KvCache plain = f.cache(48, 0);
      for (int l = 0; l < 2; l++) plain.append(l, kv.keys[l], 0, kv.values[l], 0, n, 0);
      float[] q = f.rand(n * f.c.qDim());
      String common = "ratio=0.25,sinks=2,window=4,bucket=8,";
      SelKv merged = policy(f, common + "alpha=0.7,gate=" + gateMin + "," + merge), off = policy(f, common + "merge=off");
      for (int l = 0; l < 2; l++) {
        merged.observe(l, q, n, 0, kv, f.ctx);
        off.observe(l, q, n, 0, plain, f.ctx);
      }
      double[][] a = windowAttention(f, kv, 1, q, w);
      float[] keys = kv.keys[1].clone(), values = kv.values[1].clone();
      merged.compress(kv, f.ctx);
      off.compress(plain, f.ctx); // the same selection, nothing merged
      assertEquals(budget, kv.length(1));
      int routed = 0, gatedOut = 0;
      for (int g = 0; g < f.c.numKvHeads(); g++) {
        int[] kept = new int[budget];
        for (int i = 0; i < budget; i++) kept[i] = plain.position(1, i, g);
        double[] groupMass = new double[n];
        for (int h = g * group; h < (g + 1) * group; h++) for (int j = 0; j < n; j++) groupMass[j] += a[h][j];
        double[] weight = new double[budget];
        double[][] vAcc = new double[budget][d], kAcc = new double[budget][d], headMass = new double[budget][group];
        for (int i = 0; i < n; i++) {
          if (SelKvMergeTest.contains(kept, i)) continue;
          int t = -1;  // the selected tokens are kept[sinks .. sinks + pick); slot = position here
          for (int c = sinks; c < sinks + pick; c++) {
            if (kept[c] / bucket == i / bucket && (t < 0 || groupMass[kept[c]] > groupMass[kept[t]])) t = c;
          }
          if (t < 0) {  // no selected token in i's bucket: the nearest one, the earlier on a tie
            t = sinks;
            for (int c = sinks; c < sinks + pick; c++) if (Math.abs(kept[c] - i) < Math.abs(kept[t] - i)) t = c;
          }
          routed++;
          double cs = SelKvMergeTest.cos(values, i * kvDim + g * d, kept[t] * kvDim + g * d, d);
          double gi = gateMin > 0 && cs < gateMin ? 0 : Math.max(cs, 0);
          if (gi == 0) {
            gatedOut++;
            continue;
          }
          weight[t] += gi * groupMass[i];
          for (int e = 0; e < d; e++) {
            vAcc[t][e] += gi * groupMass[i] * values[i * kvDim + g * d + e];
            kAcc[t][e] += gi * groupMass[i] * keys[i * kvDim + g * d + e];
          }
          for (int r = 0; r < group; r++) headMass[t][r] += gi * a[g * group + r][i];
        }
        for (int t = 0; t < budget; t++) {
          double at = groupMass[kept[t]];
          for (int e = 0; e < d; e++) {
            double v0 = values[kept[t] * kvDim + g * d + e], k0 = keys[kept[t] * kvDim + g * d + e];
            double wantV = weight[t] > 0 ? (at * v0 + vAcc[t][e]) / (at + weight[t]) : v0;
            double wantK = weight[t] > 0 && merge.equals("merge=kv") ? (at * k0 + kAcc[t][e]) / (at + weight[t]) : k0;
            assertEquals(wantV, kv.values[1][t * kvDim + g * d + e], 1e-4 * (1 + Math.abs(wantV)), "value, kept " + t);
            assertEquals(wantK, kv.keys[1][t * kvDim + g * d + e], 1e-4 * (1 + Math.abs(wantK)), "key, kept " + t);
          }
          float[] roped = f.rotated(kv.keys[1], t * kvDim + g * d, kept[t]);  // the rotated copy follows the key
          for (int e = 0; e < d; e++) assertEquals(roped[e], kv.ropedKeys[1][t * kvDim + g * d + e], 1e-5f);
          for (int r = 0; r < group; r++) {
            int h = g * group + r;
            double m = headMass[t][r], aht = a[h][kept[t]];
            double want = m > 0 ? 0.7 * Math.log((aht + m) / aht) : 0;
            assertEquals(want, kv.logitBias[1][t * heads + h], 1e-3 * (1 + Math.abs(want)), "bias, kept " + t + " head " + h);
          }
        }
      }
      assertEquals(2 * (n - budget), routed, "every dropped token has a target");
      if (gateMin > 0) assertTrue(gatedOut > 0 && gatedOut < routed, "gate " + gateMin + " evicted " + gatedOut);
    }
  }

  /**
   * The middle of the prompt is twelve exact copies (key, value, position) of one token; one is
   * kept, the others route to it with gate 1 and the same attention per head, so R = 12 for every
   * query head: with α = 1 the compressed cache attends exactly like the full one (proportional
   * attention). α = 0 does not.
   */
  @Test
  void droppedCopiesWithAlphaOneReproduceDenseAttention() {
    int n = 16, copyPos = 7;
    double maxErrAlpha1 = 0, minErrAlpha0 = Double.MAX_VALUE;
    for (double alpha : new double[] {1, 0}) {
      try (Fixture g = new Fixture(34)) { // same random stream for both alphas
        int kvDim = g.c.kvDim();
        KvCache kv = new KvCache(g.c, g.rope, n + 1), full = new KvCache(g.c, g.rope, n + 1);
        for (int l = 0; l < 2; l++) {
          float[] k = g.rand(n * kvDim), v = g.rand(n * kvDim);
          for (int s = 3; s < 14; s++) {
            System.arraycopy(k, 2 * kvDim, k, s * kvDim, kvDim);
            System.arraycopy(v, 2 * kvDim, v, s * kvDim, kvDim);
          }
          for (int s = 0; s < n; s++) {
            int pos = s < 2 || s >= 14 ? s : copyPos;
            kv.append(l, k, s * kvDim, v, s * kvDim, 1, pos);
            full.append(l, k, s * kvDim, v, s * kvDim, 1, pos);
          }
        }
        float[] prompt = g.rand(n * g.c.qDim());
        // budget round(0.3125 · 16) = 5: 2 sinks, one selected copy, the 2-token window
        SelKv s = new SelKv(PolicySpec.parse("selkv:ratio=0.3125,sinks=2,window=2,alpha=" + alpha).kv(), g.ctx);
        for (int l = 0; l < 2; l++) s.observe(l, prompt, n, 0, kv, g.ctx);
        s.compress(kv, g.ctx);
        assertEquals(5, kv.length(1));
        float[] k16 = g.rand(kvDim), v16 = g.rand(kvDim);
        kv.append(1, k16, 0, v16, 0, 1, 16);
        full.append(1, k16, 0, v16, 0, 1, 16);
        float[] q = g.rand(g.c.qDim()), before = new float[g.c.qDim()], after = new float[g.c.qDim()];
        new DenseAttention().decode(1, q, 16, full, before, g.ctx);
        new DenseAttention().decode(1, q, 16, kv, after, g.ctx);
        double err = Fixture.relErr(after, before);
        if (alpha == 1) maxErrAlpha1 = err;
        else minErrAlpha0 = err;
      }
    }
    assertTrue(maxErrAlpha1 <= 1e-5, "alpha 1: " + maxErrAlpha1);
    assertTrue(minErrAlpha0 > 1e-3, "alpha 0 should differ: " + minErrAlpha0);
  }

  /** A budget covering every token changes nothing: same cache, no bias, decode exactly dense. */
  @Test
  void budgetCoveringEveryTokenIsDenseAttention() {
    for (String p : new String[] {"ratio=1", "ratio=0.5,sinks=30,window=30"}) {
      try (Fixture f = new Fixture(35)) {
        KvCache kv = f.cache(64, 50), full = f.cache(64, 0);
        for (int l = 0; l < 2; l++) full.append(l, kv.keys[l], 0, kv.values[l], 0, 50, 0);
        SelKv s = policy(f, p);
        for (int l = 0; l < 2; l++) s.observe(l, f.rand(50 * f.c.qDim()), 50, 0, kv, f.ctx);
        s.compress(kv, f.ctx);
        assertEquals(50, kv.length(0), p);
        assertArrayEquals(full.values[0], kv.values[0], p);
        assertNull(kv.logitBias[1], p);
        f.append(kv, 1, 50);
        for (int l = 0; l < 2; l++) full.append(l, kv.keys[l], 50 * f.c.kvDim(), kv.values[l], 50 * f.c.kvDim(), 1, 50);
        float[] q = f.rand(f.c.qDim()), a = new float[f.c.qDim()], b = new float[f.c.qDim()];
        new DenseAttention().decode(1, q, 50, kv, a, f.ctx);
        new DenseAttention().decode(1, q, 50, full, b, f.ctx);
        assertArrayEquals(b, a, p);
      }
    }
  }
}
