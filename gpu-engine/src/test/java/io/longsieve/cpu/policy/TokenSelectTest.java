package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import org.junit.jupiter.api.Test;

/** TokenSelect against a brute-force transcription of research/algorithms.md §1.4–1.9. */
class TokenSelectTest {

  static TokenSelect policy(Fixture f, String params, SelectionStats stats) {
    return new TokenSelect(PolicySpec.parse("prefill=tokenselect:" + params).prefill(), stats, f.ctx);
  }

  /**
   * Reference output of rows [row0, row0+m) whose last row sees slots [0, end); q rows are
   * pre-RoPE, positions pos0 ...; selection per the official algorithm, computed in fp64.
   */
  static float[] reference(Fixture f, KvCache kv, int layer, float[] q, int row0, int m, int pos0, int end,
                           PolicyTerm t) {
    var c = f.c;
    int heads = c.numHeads(), kvHeads = c.numKvHeads(), d = c.headDim(), group = c.group();
    int sinks = t.intParam("sinks"), k = t.intParam("k"), window = t.intParam("window"), pool = t.intParam("pool");
    boolean perKv = t.text("heads").equals("kvhead"), mod = t.text("gqa").equals("mod");
    boolean compact = t.text("positions").equals("compact");
    double scale = t.text("scale").equals("sqrt") ? 1 / Math.sqrt(d) : 1;
    int local = Math.max(window, m), cands = end - local - sinks, lists = perKv ? kvHeads : 1;
    float[] out = new float[m * c.qDim()];
    int[][] list = new int[lists][];
    if (sinks + k + local >= end) {
      for (int g = 0; g < lists; g++) list[g] = Fixture.range(0, end);
    } else {
      double[][] qf = new double[heads][d];
      for (int i = 0; i < m; i++) {
        for (int h = 0; h < heads; h++) {
          float[] x = f.rotated(q, ((row0 + i) * heads + h) * d, window + i);
          for (int e = 0; e < d; e++) qf[h][e] += x[e] / m;
        }
      }
      double[][] votes = new double[lists][cands];
      for (int h = 0; h < heads; h++) {
        int kvs = mod ? h % kvHeads : h / group;
        double[] s = new double[cands];
        double max = Double.NEGATIVE_INFINITY, z = 0;
        for (int cI = 0; cI < cands; cI++) {
          for (int e = 0; e < d; e++) s[cI] += qf[h][e] * kv.keys[layer][(sinks + cI) * c.kvDim() + kvs * d + e];
          s[cI] *= scale;
          max = Math.max(max, s[cI]);
        }
        for (int cI = 0; cI < cands; cI++) z += s[cI] = Math.exp(s[cI] - max);
        for (int cI = 0; cI < cands; cI++) votes[perKv ? h / group : 0][cI] += s[cI] / z; // list g: the heads that attend with KV head g
      }
      for (int g = 0; g < lists; g++) {
        float[] v = new float[cands];
        for (int cI = 0; cI < cands; cI++) v[cI] = (float) votes[g][cI];
        if (pool > 1) v = maxPoolReference(v, pool);
        int[] top = TopKTest.bruteForce(v, k);
        list[g] = new int[sinks + top.length + local];
        for (int i = 0; i < sinks; i++) list[g][i] = i;
        for (int i = 0; i < top.length; i++) list[g][sinks + i] = sinks + top[i];
        for (int i = 0; i < local; i++) list[g][sinks + top.length + i] = end - local + i;
      }
    }
    for (int i = 0; i < m; i++) {
      for (int h = 0; h < heads; h++) {
        int g = h / group;
        int[] l = list[perKv ? g : 0];
        int visible = l.length - m + i + 1;
        int[] slots = java.util.Arrays.copyOf(l, visible);
        boolean dense = l.length == end;
        int[] keyPos = compact && !dense ? Fixture.range(0, visible) : slots.clone();
        if (!compact || dense) for (int e = 0; e < visible; e++) keyPos[e] = kv.positions[layer][slots[e]];
        int qpos = compact && !dense ? visible - 1 : pos0 + i;
        double[] o = f.reference(kv, layer, q, ((row0 + i) * heads + h) * d, qpos, h, slots, keyPos);
        for (int e = 0; e < d; e++) out[(i * heads + h) * d + e] = (float) o[e];
      }
    }
    return out;
  }

  /** torch max_pool1d(kernel, stride 1, padding (kernel-1)/2) written out. */
  static float[] maxPoolReference(float[] v, int kernel) {
    int pad = (kernel - 1) / 2, len = v.length + 2 * pad - kernel + 1;
    float[] o = new float[len];
    for (int i = 0; i < len; i++) {
      o[i] = Float.NEGATIVE_INFINITY;
      for (int j = 0; j < kernel; j++) {
        int src = i - pad + j;
        if (src >= 0 && src < v.length) o[i] = Math.max(o[i], v[src]);
      }
    }
    return o;
  }

  static final String[] VARIANTS = {
      "sinks=4,k=12,window=8,cache=off",
      "sinks=4,k=12,window=8,cache=off,gqa=mod",
      "sinks=2,k=10,window=6,cache=off,heads=kvhead",
      "sinks=4,k=12,window=8,cache=off,positions=original",
      "sinks=4,k=12,window=8,cache=off,pool=3",
      "sinks=4,k=12,window=8,cache=off,pool=4",
      "sinks=4,k=12,window=8,cache=off,scale=sqrt,heads=kvhead,gqa=mod",
  };

  @Test
  void decodeStepMatchesBruteForceForEveryVariant() {
    try (Fixture f = new Fixture(11)) {
      for (String v : VARIANTS) {
        KvCache kv = f.cache(128, 97);
        PolicyTerm t = PolicySpec.parse("prefill=tokenselect:" + v).prefill();
        TokenSelect ts = policy(f, v, new SelectionStats(2));
        float[] q = f.rand(f.c.qDim()), out = new float[f.c.qDim()];
        ts.decode(1, q, 96, kv, out, f.ctx);
        float[] ref = reference(f, kv, 1, q, 0, 1, 96, 97, t);
        assertTrue(Fixture.relErr(out, ref) < 1e-4, v + ": " + Fixture.relErr(out, ref));
      }
    }
  }

  @Test
  void prefillSubChunksMatchBruteForce() {
    try (Fixture f = new Fixture(12)) {
      for (String v : VARIANTS) {
        String params = v + ",chunk=16";
        PolicyTerm t = PolicySpec.parse("prefill=tokenselect:" + params).prefill();
        KvCache kv = f.cache(200, 60);
        int n = 40; // an engine chunk of 40 rows: sub-chunks of 16, 16, 8
        f.append(kv, n, 60);
        float[] q = f.rand(n * f.c.qDim()), out = new float[n * f.c.qDim()];
        policy(f, params, new SelectionStats(2)).prefill(0, q, n, 60, kv, out, f.ctx);
        for (int s = 0; s < n; s += 16) {
          int m = Math.min(16, n - s);
          float[] ref = reference(f, kv, 0, q, s, m, 60 + s, 60 + s + m, t);
          float[] got = java.util.Arrays.copyOfRange(out, s * f.c.qDim(), (s + m) * f.c.qDim());
          assertTrue(Fixture.relErr(got, ref) < 1e-4, v + " sub-chunk " + s + ": " + Fixture.relErr(got, ref));
        }
      }
    }
  }

  @Test
  void budgetCoveringTheContextIsDenseAttention() {
    try (Fixture f = new Fixture(13)) {
      KvCache kv = f.cache(160, 100);
      float[] q = f.rand(f.c.qDim()), out = new float[f.c.qDim()], dense = new float[f.c.qDim()];
      policy(f, "sinks=4,k=64,window=32", new SelectionStats(2)).decode(1, q, 99, kv, out, f.ctx);
      new DenseAttention().decode(1, q, 99, kv, dense, f.ctx);
      assertTrue(Fixture.relErr(out, dense) <= 1e-5);
      int n = 30;
      f.append(kv, n, 100);
      float[] qp = f.rand(n * f.c.qDim()), op = new float[n * f.c.qDim()], dp = new float[n * f.c.qDim()];
      policy(f, "k=4096,chunk=7", new SelectionStats(2)).prefill(0, qp, n, 100, kv, op, f.ctx);
      new DenseAttention().prefill(0, qp, n, 100, kv, dp, f.ctx);
      assertTrue(Fixture.relErr(op, dp) <= 1e-5);
    }
  }

  @Test
  void compactPositionsOverTheWholeCacheAreOriginalPositions() {
    // the list-index RoPE path equals dense attention when the list is every slot in order
    try (Fixture f = new Fixture(14)) {
      KvCache kv = f.cache(64, 50);
      int d = f.c.headDim();
      ListAttention.RopeTable table = new ListAttention.RopeTable(f.rope);
      table.ensure(50);
      int[] all = Fixture.range(0, 50);
      float[] buf = new float[50 * d], q = f.rand(f.c.qDim()), out = new float[f.c.qDim()], dense = new float[f.c.qDim()];
      for (int h = 0; h < f.c.numHeads(); h++) {
        int g = h / f.c.group();
        ListAttention.gatherCompact(0, g, all, 0, 50, kv, table, buf, 0);
        float[] qr = java.util.Arrays.copyOfRange(q, h * d, (h + 1) * d);
        table.rotate(qr, 0, 49);
        ListAttention.attend(0, h, qr, 0, all, 0, 50, buf, 0, kv, out, h * d, f.ctx.scale());
      }
      new DenseAttention().decode(0, q, 49, kv, dense, f.ctx);
      assertTrue(Fixture.relErr(out, dense) <= 1e-5, "" + Fixture.relErr(out, dense));
    }
  }

  @Test
  void officialQuirkOptionsChangeTheResult() {
    try (Fixture f = new Fixture(15)) {
      KvCache kv = f.cache(300, 300);
      float[] q = f.rand(f.c.qDim());
      float[] base = run(f, kv, q, "sinks=4,k=8,window=8,cache=off");
      for (String quirk : new String[] {"gqa=mod", "positions=original", "pool=4", "heads=kvhead", "scale=sqrt"}) {
        float[] other = run(f, kv, q, "sinks=4,k=8,window=8,cache=off," + quirk);
        assertTrue(Fixture.relErr(other, base) > 1e-3, quirk + " changed nothing");
      }
    }
  }

  private static float[] run(Fixture f, KvCache kv, float[] q, String params) {
    float[] out = new float[f.c.qDim()];
    policy(f, params, new SelectionStats(2)).decode(0, q, kv.length(0) - 1, kv, out, f.ctx);
    return out;
  }

  @Test
  void maxPoolFollowsTorchIncludingTheEvenKernelShift() {
    try (Fixture f = new Fixture(16)) {
      TokenSelect ts = policy(f, "pool=4", new SelectionStats(2));
      float[] v = f.rand(23);
      for (int kernel : new int[] {2, 3, 4, 5, 8}) {
        float[] ref = maxPoolReference(v, kernel);
        int len = ts.maxPool(v, 0, v.length, kernel);
        assertEquals(ref.length, len);
        float[] got = new float[len];
        // pooled is private; re-run through a copy of the arithmetic via a fresh policy
        System.arraycopy(pooledOf(ts), 0, got, 0, len);
        assertArrayEquals(ref, got, "kernel " + kernel);
      }
    }
  }

  private static float[] pooledOf(TokenSelect ts) {
    try {
      var fld = TokenSelect.class.getDeclaredField("pooled");
      fld.setAccessible(true);
      return (float[]) fld.get(ts);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void fingerprintIsTheMeanOfQueriesRotatedToTheWindowOffset() {
    try (Fixture f = new Fixture(17)) {
      TokenSelect ts = policy(f, "window=20", new SelectionStats(2));
      int m = 5, d = f.c.headDim();
      float[] q = f.rand((m + 2) * f.c.qDim());
      ts.fingerprint(q, 2, m);
      float[] qf = qfOf(ts);
      for (int h = 0; h < f.c.numHeads(); h++) {
        for (int e = 0; e < d; e++) {
          double s = 0;
          for (int i = 0; i < m; i++) s += f.rotated(q, ((2 + i) * f.c.numHeads() + h) * d, 20 + i)[e];
          assertEquals(s / m, qf[h * d + e], 1e-5);
        }
      }
    }
  }

  private static float[] qfOf(TokenSelect ts) {
    try {
      var fld = TokenSelect.class.getDeclaredField("qf");
      fld.setAccessible(true);
      return (float[]) fld.get(ts);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void selectionCacheThresholdAboveOneNeverHitsBelowMinusOneAlwaysHits() {
    try (Fixture f = new Fixture(18)) {
      for (double threshold : new double[] {1.01, -1.01, 0.9}) {
        KvCache kv = f.cache(200, 150);
        SelectionStats stats = new SelectionStats(2);
        TokenSelect ts = policy(f, "sinks=4,k=8,window=8,cache=on,threshold=" + threshold, stats);
        float[] out = new float[f.c.qDim()];
        int steps = 6;
        for (int s = 0; s < steps; s++) {
          f.append(kv, 1, 150 + s);
          float[] q = f.rand(f.c.qDim());
          for (int layer = 0; layer < 2; layer++) ts.decode(layer, q, 150 + s, kv, out, f.ctx);
        }
        assertEquals(2L * steps, stats.cacheLookups);
        if (threshold > 1) assertEquals(0, stats.cacheHits);
        if (threshold < -1) assertEquals(2L * (steps - 1), stats.cacheHits); // all but each layer's cold start
      }
    }
  }

  @Test
  void aCacheHitReusesTheTopKButRecomputesSinksAndWindow() {
    try (Fixture f = new Fixture(19)) {
      KvCache kv = f.cache(200, 150);
      String p = "sinks=4,k=8,window=8";
      TokenSelect cached = policy(f, p + ",cache=on,threshold=-2", new SelectionStats(2));
      float[] q1 = f.rand(f.c.qDim()), q2 = f.rand(f.c.qDim()), out = new float[f.c.qDim()];
      cached.decode(0, q1, 149, kv, out, f.ctx);
      f.append(kv, 1, 150);
      cached.decode(0, q2, 150, kv, out, f.ctx); // reuses q1's top-k
      // reference: q2 attending (compact positions) to the top-k that q1's votes chose
      float[] refQ1Selection = referenceWithSelectionOf(f, kv, q1, q2);
      assertTrue(Fixture.relErr(out, refQ1Selection) < 1e-4);
    }
  }

  /** Output for q2 over sinks ++ top-k(q1 votes on the first 150 − 8 slots' candidates) ++ last 8 slots. */
  private static float[] referenceWithSelectionOf(Fixture f, KvCache kv, float[] q1, float[] q2) {
    // top-k chosen when the cache had 150 slots: candidates [4, 142)
    int heads = f.c.numHeads(), d = f.c.headDim(), cands = 150 - 8 - 4;
    double[] vote = new double[cands];
    for (int h = 0; h < heads; h++) {
      float[] x = f.rotated(q1, h * d, 8);
      double[] s = new double[cands];
      double max = Double.NEGATIVE_INFINITY, z = 0;
      for (int c = 0; c < cands; c++) {
        for (int e = 0; e < d; e++) s[c] += x[e] * kv.keys[0][(4 + c) * f.c.kvDim() + (h / f.c.group()) * d + e];
        max = Math.max(max, s[c]);
      }
      for (int c = 0; c < cands; c++) z += s[c] = Math.exp(s[c] - max);
      for (int c = 0; c < cands; c++) vote[c] += s[c] / z;
    }
    float[] v = new float[cands];
    for (int c = 0; c < cands; c++) v[c] = (float) vote[c];
    int[] top = TopKTest.bruteForce(v, 8);
    int[] list = new int[4 + 8 + 8];
    for (int i = 0; i < 4; i++) list[i] = i;
    for (int i = 0; i < 8; i++) list[4 + i] = 4 + top[i];
    for (int i = 0; i < 8; i++) list[12 + i] = 151 - 8 + i;
    float[] out = new float[f.c.qDim()];
    for (int h = 0; h < heads; h++) {
      double[] o = f.reference(kv, 0, q2, h * d, list.length - 1, h, list, Fixture.range(0, list.length));
      for (int e = 0; e < d; e++) out[h * d + e] = (float) o[e];
    }
    return out;
  }
}
