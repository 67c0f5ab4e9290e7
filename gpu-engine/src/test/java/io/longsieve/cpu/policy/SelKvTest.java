package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.PolicySpec;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** SelKV: selection (VATP score, GQA union), gated merge and compensation bias against their definitions. */
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

  @Test
  void mergeAveragesValuesByTheCosineGateAndBiasesByTheMassRatio() {
    checkMerge(0);
  }

  /** The diagnostic gate: a dropped token whose best cosine is below it is evicted, adding neither value nor mass. */
  @Test
  void gateThresholdMergesOnlyCloseTokens() {
    checkMerge(0.3);
  }

  private static void checkMerge(double gateMin) {
    try (Fixture f = new Fixture(32)) {
      int n = 40, d = f.c.headDim(), kvDim = f.c.kvDim();
      KvCache kv = f.cache(48, n);
      KvCache plain = f.cache(48, 0);
      for (int l = 0; l < 2; l++) plain.append(l, kv.keys[l], 0, kv.values[l], 0, n, 0);
      float[] q = f.rand(n * f.c.qDim());
      SelKv merged = policy(f, "ratio=0.25,sinks=2,window=4,alpha=0.7,gate=" + gateMin), off = policy(f, "ratio=0.25,sinks=2,window=4,merge=off");
      for (int l = 0; l < 2; l++) {
        merged.observe(l, q, n, 0, kv, f.ctx);
        off.observe(l, q, n, 0, plain, f.ctx);
      }
      double[][] a = windowAttention(f, kv, 1, q, 4);
      float[] keys = kv.keys[1].clone(), values = kv.values[1].clone();
      merged.compress(kv, f.ctx);
      off.compress(plain, f.ctx); // the same selection, nothing merged
      int b = kv.length(1), skipped = 0;
      for (int g = 0; g < f.c.numKvHeads(); g++) {
        int[] kept = new int[b];
        for (int i = 0; i < b; i++) kept[i] = plain.position(1, i, g);
        double[] gate = new double[b], mass = new double[b];
        double[][] acc = new double[b][d];
        for (int j = 0, next = 0; j < n; j++) {
          if (next < b && kept[next] == j) {
            next++;
            continue;
          }
          int best = -1;
          double bestCos = Double.NEGATIVE_INFINITY;
          for (int t = 0; t < b; t++) {
            double cs = cos(keys, j * kvDim + g * d, kept[t] * kvDim + g * d, d);
            if (cs > bestCos + 1e-9) {
              bestCos = cs;
              best = t;
            }
          }
          if (gateMin > 0 && bestCos < gateMin) {
            skipped++;
            continue;
          }
          gate[best] += Math.max(bestCos, 0);
          for (int h = g * f.c.group(); h < (g + 1) * f.c.group(); h++) mass[best] += a[h][j];
          for (int e = 0; e < d; e++) acc[best][e] += Math.max(bestCos, 0) * values[j * kvDim + g * d + e];
        }
        for (int t = 0; t < b; t++) {
          for (int e = 0; e < d; e++) {
            double want = (values[kept[t] * kvDim + g * d + e] + acc[t][e]) / (1 + gate[t]);
            assertEquals(want, kv.values[1][t * kvDim + g * d + e], 1e-4 * (1 + Math.abs(want)));
          }
          double at = 0;
          for (int h = g * f.c.group(); h < (g + 1) * f.c.group(); h++) at += a[h][kept[t]];
          double wantBias = mass[t] > 0 ? 0.7 * Math.log((at + mass[t]) / at) : 0;
          assertEquals(wantBias, kv.logitBias[1][t * f.c.numKvHeads() + g], 1e-3 * (1 + Math.abs(wantBias)));
        }
      }
      if (gateMin > 0) assertTrue(skipped > 0 && skipped < 2 * (n - b), "gate " + gateMin + " skipped " + skipped);
    }
  }

  private static double cos(float[] k, int a, int b, int d) {
    double ab = 0, aa = 0, bb = 0;
    for (int e = 0; e < d; e++) {
      ab += (double) k[a + e] * k[b + e];
      aa += (double) k[a + e] * k[a + e];
      bb += (double) k[b + e] * k[b + e];
    }
    return ab / Math.sqrt(aa * bb);
  }

  /**
   * Tokens 0, 1 (sinks) and 14 (window) are distinct; the middle slots are exact copies (key,
   * value, position) of them, so every dropped token merges into its twin: with α = 1 the
   * compressed cache with its log-count bias attends exactly like the full cache (proportional
   * attention). α = 0 does not.
   */
  @Test
  void droppedCopiesWithAlphaOneReproduceDenseAttention() {
    try (Fixture f = new Fixture(33)) {
      int n = 16, kvDim = f.c.kvDim();
      int[] twinOf = {0, 1, 14, 0, 1, 14, 14, 0, 1, 14, 0, 1, 14, 14};
      double maxErrAlpha1 = 0, minErrAlpha0 = Double.MAX_VALUE;
      for (double alpha : new double[] {1, 0}) {
        Fixture g = new Fixture(34); // same random stream for both alphas
        KvCache kv = new KvCache(g.c, g.rope, n + 1);
        float[][] k = new float[2][], v = new float[2][];
        for (int l = 0; l < 2; l++) {
          k[l] = g.rand(n * kvDim);
          v[l] = g.rand(n * kvDim);
        }
        for (int l = 0; l < 2; l++) {
          for (int s = 2; s < 14; s++) {
            System.arraycopy(k[l], twinOf[s] * kvDim, k[l], s * kvDim, kvDim);
            System.arraycopy(v[l], twinOf[s] * kvDim, v[l], s * kvDim, kvDim);
          }
          for (int s = 0; s < n; s++) kv.append(l, k[l], s * kvDim, v[l], s * kvDim, 1, s < 2 || s >= 14 ? s : twinOf[s]);
        }
        float[] prompt = g.rand(n * g.c.qDim());
        SelKv s = new SelKv(PolicySpec.parse("selkv:ratio=0.25,sinks=2,window=2,alpha=" + alpha).kv(), g.ctx);
        for (int l = 0; l < 2; l++) s.observe(l, prompt, n, 0, kv, g.ctx);
        float[] q = g.rand(g.c.qDim()), before = new float[g.c.qDim()], after = new float[g.c.qDim()];
        KvCache full = copy(g, kv, n);
        full.append(1, g.rand(kvDim), 0, g.rand(kvDim), 0, 1, 16);
        s.compress(kv, g.ctx);
        assertEquals(4, kv.length(1));
        kv.append(1, full.keys[1], 16 * kvDim, full.values[1], 16 * kvDim, 1, 16);
        new DenseAttention().decode(1, q, 16, full, before, g.ctx);
        new DenseAttention().decode(1, q, 16, kv, after, g.ctx);
        double err = Fixture.relErr(after, before);
        if (alpha == 1) maxErrAlpha1 = err;
        else minErrAlpha0 = err;
        g.close();
      }
      assertTrue(maxErrAlpha1 <= 1e-5, "alpha 1: " + maxErrAlpha1);
      assertTrue(minErrAlpha0 > 1e-3, "alpha 0 should differ: " + minErrAlpha0);
    }
  }

  private static KvCache copy(Fixture f, KvCache kv, int n) {
    KvCache c = new KvCache(f.c, f.rope, n + 1);
    for (int l = 0; l < 2; l++) {
      for (int s = 0; s < n; s++) {
        c.append(l, kv.keys[l], s * f.c.kvDim(), kv.values[l], s * f.c.kvDim(), 1, kv.positions[l][s]);
      }
    }
    return c;
  }

  @Test
  void ratioOneKeepsTheCacheUnchanged() {
    try (Fixture f = new Fixture(35)) {
      KvCache kv = f.cache(64, 50);
      float[] values = kv.values[0].clone();
      SelKv s = policy(f, "ratio=1");
      for (int l = 0; l < 2; l++) s.observe(l, f.rand(50 * f.c.qDim()), 50, 0, kv, f.ctx);
      s.compress(kv, f.ctx);
      assertEquals(50, kv.length(0));
      assertArrayEquals(values, kv.values[0]);
    }
  }
}
