package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** Token Sparse Attention against a brute-force transcription of research/algorithms.md §2.3. */
class TokenSparseAttentionTest {

  static TokenSparseAttention policy(Fixture f, String params, SelectionStats stats) {
    return new TokenSparseAttention(PolicySpec.parse("tsa:" + params).prefill(), stats, f.ctx, null);
  }

  /** Reference for a chunk of n rows whose keys are slots [0, end), positions = slots. */
  static float[] reference(Fixture f, KvCache kv, int layer, float[] q, int n, int end, double tau, int min,
                           int window, int pool) {
    return reference(f, kv, layer, q, n, end, tau, min, window, pool, -1);
  }

  /** As above; forcedKeep &gt;= 0 replaces tau's cut-off (tsa:keep). */
  static float[] reference(Fixture f, KvCache kv, int layer, float[] q, int n, int end, double tau, int min,
                           int window, int pool, int forcedKeep) {
    var c = f.c;
    int heads = c.numHeads(), d = c.headDim(), group = c.group(), before = end - n, w = Math.min(window, n);
    int prefix = end - w;
    double[][] a = new double[heads][prefix];
    for (int h = 0; h < heads; h++) {
      for (int r = 0; r < w; r++) {
        int row = n - w + r, visible = prefix + r + 1;
        float[] qr = f.rotated(q, (row * heads + h) * d, before + row);
        double[] s = new double[visible];
        double max = Double.NEGATIVE_INFINITY, z = 0;
        for (int j = 0; j < visible; j++) {
          float[] k = f.rotated(kv.keys[layer], j * c.kvDim() + (h / group) * d, j);
          for (int e = 0; e < d; e++) s[j] += (double) qr[e] * k[e];
          s[j] /= Math.sqrt(d);
          max = Math.max(max, s[j]);
        }
        for (int j = 0; j < visible; j++) z += s[j] = Math.exp(s[j] - max);
        for (int j = 0; j < prefix; j++) a[h][j] += s[j] / z / w;
      }
      if (pool > 1) {
        double[] p = new double[prefix];
        for (int o = 0; o < prefix; o++) {
          for (int j = o - pool / 2; j < o - pool / 2 + pool; j++) if (j >= 0 && j < prefix) p[o] += a[h][j];
          p[o] /= pool;
        }
        a[h] = p;
      }
    }
    double[] g = new double[prefix];
    double tot = 0;
    for (int j = 0; j < prefix; j++) {
      for (int h = 0; h < heads; h++) g[j] += a[h][j] / heads;
      tot += g[j];
    }
    double[] sorted = new double[prefix];
    for (int j = 0; j < prefix; j++) sorted[j] = g[j] / (tot + 1e-8);
    Arrays.sort(sorted);
    double cum = 0;
    int drop = 0;
    for (double v : sorted) {
      cum += v;
      if (cum < tau) drop++;
      else break;
    }
    float[] out = new float[n * c.qDim()];
    int keep = forcedKeep >= 0 ? forcedKeep : drop == 0 ? prefix : Math.max(min, prefix - drop - 1);
    for (int h = 0; h < heads; h++) {
      int[] list;
      if (keep >= prefix) {
        list = Fixture.range(0, end);
      } else {
        float[] ah = new float[prefix];
        for (int j = 0; j < prefix; j++) ah[j] = (float) a[h][j];
        int[] top = TopKTest.bruteForce(ah, keep);
        list = new int[keep + w];
        System.arraycopy(top, 0, list, 0, keep);
        for (int i = 0; i < w; i++) list[keep + i] = prefix + i;
      }
      for (int e = 0; e < list.length; e++) {
        if (list[e] < before) continue;
        int i = list[e] - before;
        int[] slots = Arrays.copyOf(list, e + 1);
        double[] o = f.reference(kv, layer, q, (i * heads + h) * d, before + i, h, slots, slots);
        for (int x = 0; x < d; x++) out[(i * heads + h) * d + x] = (float) o[x];
      }
    }
    return out;
  }

  @Test
  void sparseLayerMatchesBruteForceWholePromptAndChunked() {
    try (Fixture f = new Fixture(21)) {
      for (int[] shape : new int[][] {{96, 96}, {96, 40}}) { // (end, chunk rows): one chunk, then a later chunk
        int end = shape[0], n = shape[1];
        for (String p : new String[] {"tau=0.3,min=8,window=8,pool=7,layers=all", "tau=0.5,min=4,window=16,pool=0,layers=all",
            "tau=0.3,min=8,window=8,pool=4,layers=all"}) {
          KvCache kv = f.cache(128, end);
          float[] q = f.rand(n * f.c.qDim()), out = new float[n * f.c.qDim()];
          SelectionStats stats = new SelectionStats(2);
          policy(f, p, stats).prefill(1, q, n, end - n, kv, out, f.ctx);
          PolicyTerm t = PolicySpec.parse("tsa:" + p).prefill();
          float[] ref = reference(f, kv, 1, q, n, end, t.doubleParam("tau"), t.intParam("min"), t.intParam("window"),
              t.intParam("pool"));
          assertTrue(Fixture.relErr(out, ref) < 1e-4, p + " " + end + "/" + n + ": " + Fixture.relErr(out, ref));
          assertEquals(1, stats.snapshot().sparseLayers(), p);
          assertTrue(stats.snapshot().selectedFractionByLayer()[1] < 1, p);
        }
      }
    }
  }

  @Test
  void droppedQueriesGetZeroOutputAndTheCacheKeepsEveryToken() {
    try (Fixture f = new Fixture(22)) {
      KvCache kv = f.cache(128, 100);
      int n = 100, d = f.c.headDim();
      float[] q = f.rand(n * f.c.qDim()), out = new float[n * f.c.qDim()];
      Arrays.fill(out, Float.NaN); // every element must be written
      policy(f, "tau=0.5,min=4,window=8,layers=all", new SelectionStats(2)).prefill(0, q, n, 0, kv, out, f.ctx);
      int zeroRows = 0;
      for (int i = 0; i < n * f.c.numHeads(); i++) {
        boolean zero = true;
        for (int e = 0; e < d; e++) {
          assertTrue(!Float.isNaN(out[i * d + e]));
          zero &= out[i * d + e] == 0f;
        }
        if (zero) zeroRows++;
      }
      assertTrue(zeroRows > 0);
      assertEquals(100, kv.length(0));
    }
  }

  @Test
  void noCoverageBudgetOrDenseLayerIsDenseAttention() {
    try (Fixture f = new Fixture(23)) {
      KvCache kv = f.cache(128, 100);
      int n = 60;
      float[] q = f.rand(n * f.c.qDim()), dense = new float[n * f.c.qDim()];
      new DenseAttention().prefill(0, q, n, 40, kv, dense, f.ctx);
      for (String p : new String[] {"tau=0,min=4,window=8,layers=all", "tau=0.5,min=4,window=8,layers=1",
          "tau=0.5,min=200,window=8,layers=all", "tau=0.5,min=92,window=8,layers=all"}) {
        float[] out = new float[n * f.c.qDim()];
        SelectionStats stats = new SelectionStats(2);
        policy(f, p, stats).prefill(0, q, n, 40, kv, out, f.ctx);
        assertTrue(Fixture.relErr(out, dense) <= 1e-5, p);
        assertEquals(0, stats.snapshot().sparseLayers(), p);
      }
    }
  }

  @Test
  void fixedKeepOfOneIsDenseAttention() {
    try (Fixture f = new Fixture(24)) {
      KvCache kv = f.cache(128, 100);
      int n = 60;
      float[] q = f.rand(n * f.c.qDim()), dense = new float[n * f.c.qDim()];
      new DenseAttention().prefill(0, q, n, 40, kv, dense, f.ctx);
      for (String p : new String[] {"keep=1.0,min=4,window=8,layers=all", "tau=0.5,keep=1,min=4,window=8,layers=all",
          "tau=0,keep=1.0,min=4,window=8,pool=1,layers=all"}) {
        float[] out = new float[n * f.c.qDim()];
        SelectionStats stats = new SelectionStats(2);
        policy(f, p, stats).prefill(0, q, n, 40, kv, out, f.ctx);
        assertTrue(Fixture.relErr(out, dense) <= 1e-5, p + ": " + Fixture.relErr(out, dense));
        assertEquals(0, stats.snapshot().sparseLayers(), p);
      }
    }
  }

  @Test
  void fixedKeepKeepsTheCeilingOfTheShareByTheSameScore() {
    try (Fixture f = new Fixture(25)) {
      for (int[] shape : new int[][] {{96, 96}, {97, 40}}) { // one chunk, then a later chunk with an odd prefix
        int end = shape[0], n = shape[1], w = 8, prefix = end - w;
        // tau 0 and tau 0.9 both give way to keep: the count is ceil(0.25 * prefix), min 4 does not bind
        for (String p : new String[] {"tau=0,keep=0.25,min=4,window=8,pool=7,layers=all",
            "tau=0.9,keep=0.25,min=4,window=8,pool=0,layers=all"}) {
          KvCache kv = f.cache(128, end);
          float[] q = f.rand(n * f.c.qDim()), out = new float[n * f.c.qDim()];
          SelectionStats stats = new SelectionStats(2);
          TokenSparseAttention tsa = policy(f, p, stats);
          tsa.prefill(1, q, n, end - n, kv, out, f.ctx);
          int expected = (int) Math.ceil(0.25 * prefix);
          assertEquals(expected, tsa.keepCount(prefix), p);
          PolicyTerm t = PolicySpec.parse("tsa:" + p).prefill();
          float[] ref = reference(f, kv, 1, q, n, end, t.doubleParam("tau"), t.intParam("min"), t.intParam("window"),
              t.intParam("pool"), expected);
          assertTrue(Fixture.relErr(out, ref) < 1e-4, p + " " + end + "/" + n + ": " + Fixture.relErr(out, ref));
          assertEquals(1, stats.snapshot().sparseLayers(), p);
          assertTrue(stats.snapshot().selectedFractionByLayer()[1] < 0.5, p);
        }
      }
      // min binds: keep = max(min, ceil(F * prefix))
      KvCache kv = f.cache(128, 96);
      TokenSparseAttention tsa = policy(f, "keep=0.1,min=30,window=8,layers=all", new SelectionStats(2));
      float[] q = f.rand(96 * f.c.qDim()), out = new float[96 * f.c.qDim()];
      tsa.prefill(1, q, 96, 0, kv, out, f.ctx);
      assertEquals(30, tsa.keepCount(88));
    }
  }

  @Test
  void avgPoolCountsZeroPadding() {
    float[] v = {3, 0, 0, 0, 6}, dst = new float[5];
    TokenSparseAttention.avgPool(v, 0, 5, 3, dst);
    assertEquals(1f, dst[0], 1e-7); // (0 + 3 + 0) / 3
    assertEquals(1f, dst[1], 1e-7);
    assertEquals(2f, dst[4], 1e-7); // (0 + 6 + 0) / 3
  }
}
