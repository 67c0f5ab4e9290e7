package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** StreamingLLM, H2O, SnapKV and Quest against their definitions; full budgets are dense attention. */
class BaselinesTest {

  static PolicyTerm term(String slot, String text) {
    PolicySpec s = PolicySpec.parse(slot + "=" + text);
    return slot.equals("kv") ? s.kv() : s.decode();
  }

  @Test
  void streamingWindowAttendsToSinksAndRecentAtCompactOrOriginalPositions() {
    try (Fixture f = new Fixture(41)) {
      KvCache kv = f.cache(128, 100);
      float[] q = f.rand(f.c.qDim());
      int[] list = new int[4 + 10];
      for (int i = 0; i < 4; i++) list[i] = i;
      for (int i = 0; i < 10; i++) list[4 + i] = 90 + i;
      for (String positions : new String[] {"compact", "original"}) {
        float[] out = new float[f.c.qDim()];
        new StreamingLlm.Window(term("decode", "streaming:sinks=4,recent=10,positions=" + positions), new SelectionStats(2), f.ctx)
            .decode(1, q, 99, kv, out, f.ctx);
        boolean compact = positions.equals("compact");
        for (int h = 0; h < f.c.numHeads(); h++) {
          double[] ref = f.reference(kv, 1, q, h * f.c.headDim(), compact ? 13 : 99, h, list,
              compact ? Fixture.range(0, 14) : list);
          assertTrue(Fixture.relErr(out, h * f.c.headDim(), ref) < 1e-4, positions);
        }
      }
      float[] out = new float[f.c.qDim()], dense = new float[f.c.qDim()];
      new StreamingLlm.Window(term("decode", "streaming:sinks=4,recent=96"), new SelectionStats(2), f.ctx).decode(1, q, 99, kv, out, f.ctx);
      new DenseAttention().decode(1, q, 99, kv, dense, f.ctx);
      assertTrue(Fixture.relErr(out, dense) <= 1e-5);
    }
  }

  @Test
  void streamingEvictionKeepsSinksAndRecent() {
    try (Fixture f = new Fixture(42)) {
      KvCache kv = f.cache(128, 100);
      float[] v = kv.values[0].clone();
      new StreamingLlm.Eviction(term("kv", "streaming:sinks=4,recent=10")).compress(kv, f.ctx);
      assertEquals(14, kv.length(0));
      assertEquals(3, kv.position(0, 3, 1));
      assertEquals(90, kv.position(0, 4, 0));
      assertEquals(v[95 * f.c.kvDim() + 3], kv.values[0][9 * f.c.kvDim() + 3]);
      StreamingLlm.Eviction rolling = new StreamingLlm.Eviction(term("kv", "streaming:sinks=4,recent=10"));
      f.append(kv, 1, 100);
      assertTrue(rolling.afterDecode(0, null, 100, kv, f.ctx));
      assertEquals(14, kv.length(0));
      assertEquals(3, kv.position(0, 3, 0));
      assertEquals(91, kv.position(0, 4, 0)); // 90 went, 100 came
      assertEquals(100, kv.position(0, 13, 1));
    }
  }

  @Test
  void snapKvKeepsTheTopPooledWindowVotesPerKvHead() {
    try (Fixture f = new Fixture(43)) {
      int n = 90, w = 6, cap = 30;
      KvCache kv = f.cache(96, n);
      float[] q = f.rand(n * f.c.qDim());
      SnapKv s = new SnapKv(term("kv", "snapkv:window=6,pool=5,capacity=30"), f.ctx);
      for (int l = 0; l < 2; l++) s.observe(l, q, n, 0, kv, f.ctx);
      double[][] a = SelKvTest.windowAttention(f, kv, 0, q, w);
      s.compress(kv, f.ctx);
      assertEquals(cap, kv.length(0));
      for (int g = 0; g < f.c.numKvHeads(); g++) {
        double[] vote = new double[n - w];
        for (int h = g * f.c.group(); h < (g + 1) * f.c.group(); h++) for (int j = 0; j < n - w; j++) vote[j] += a[h][j];
        float[] pooled = new float[n - w];
        for (int o = 0; o < n - w; o++) {
          double sum = 0;
          for (int j = o - 2; j <= o + 2; j++) if (j >= 0 && j < n - w) sum += vote[j];
          pooled[o] = (float) (sum / 5);
        }
        int[] top = TopKTest.bruteForce(pooled, cap - w);
        for (int i = 0; i < cap - w; i++) assertEquals(top[i], kv.position(0, i, g));
        for (int i = 0; i < w; i++) assertEquals(n - w + i, kv.position(0, cap - w + i, g));
      }
    }
  }

  @Test
  void h2oKeepsHeavyHittersOfAllPromptQueriesPlusRecent() {
    try (Fixture f = new Fixture(44)) {
      int n = 60, chunk = 25;
      KvCache kv = f.cache(64, 0);
      float[] q = f.rand(n * f.c.qDim());
      H2o h2o = new H2o(term("kv", "h2o:heavy=0.2,recent=0.1"), f.ctx);
      for (int s = 0; s < n; s += chunk) { // the prompt arrives in chunks, as in the engine
        int m = Math.min(chunk, n - s);
        f.append(kv, m, s);
        for (int l = 0; l < 2; l++) h2o.observe(l, Arrays.copyOfRange(q, s * f.c.qDim(), (s + m) * f.c.qDim()), m, s, kv, f.ctx);
      }
      double[][] a = SelKvTest.windowAttention(f, kv, 1, q, n); // every query is in the "window"
      h2o.compress(kv, f.ctx);
      int heavy = 12, recent = 6;
      assertEquals(heavy + recent, kv.length(1));
      for (int g = 0; g < f.c.numKvHeads(); g++) {
        float[] acc = new float[n - recent];
        for (int h = g * f.c.group(); h < (g + 1) * f.c.group(); h++) for (int j = 0; j < n - recent; j++) acc[j] += (float) a[h][j];
        int[] top = TopKTest.bruteForce(acc, heavy);
        for (int i = 0; i < heavy; i++) assertEquals(top[i], kv.position(1, i, g), "kv head " + g);
        assertEquals(n - 1, kv.position(1, heavy + recent - 1, g));
      }
    }
  }

  @Test
  void h2oHoldsItsBudgetDuringDecodeByEvictingTheLowestAccumulatedScore() {
    try (Fixture f = new Fixture(48)) {
      int n = 60, d = f.c.headDim(), layer = 1;
      KvCache kv = f.cache(64, n);
      float[] prompt = f.rand(n * f.c.qDim()), scratch = new float[n * f.c.qDim()];
      double[][] promptAcc = SelKvTest.windowAttention(f, kv, layer, prompt, n); // (heads, slot) over all prompt queries
      AttentionPolicy policy = ComposedPolicy.of(PolicySpec.parse("h2o:heavy=0.2,recent=0.1"));
      for (int l = 0; l < 2; l++) policy.prefill(l, prompt, n, 0, kv, scratch, f.ctx);
      policy.afterPrefill(kv, f.ctx);
      int budget = 18, recent = 6;
      assertEquals(budget, kv.length(layer));
      f.append(kv, 1, n);
      float[] q = f.rand(f.c.qDim()), out = new float[f.c.qDim()];
      // expected victim per KV head: prompt score + this step's probabilities, lowest outside the recent window
      int[][] expectedKept = new int[f.c.numKvHeads()][];
      for (int g = 0; g < f.c.numKvHeads(); g++) {
        double[] score = new double[budget + 1];
        int[] pos = new int[budget + 1];
        for (int i = 0; i <= budget; i++) pos[i] = kv.position(layer, i, g);
        for (int h = g * f.c.group(); h < (g + 1) * f.c.group(); h++) {
          float[] qr = f.rotated(q, h * d, n);
          double[] s = new double[budget + 1];
          double max = Double.NEGATIVE_INFINITY, z = 0;
          for (int i = 0; i <= budget; i++) {
            for (int e = 0; e < d; e++) s[i] += (double) qr[e] * kv.ropedKeys[layer][i * f.c.kvDim() + g * d + e];
            s[i] /= Math.sqrt(d);
            max = Math.max(max, s[i]);
          }
          for (int i = 0; i <= budget; i++) z += s[i] = Math.exp(s[i] - max);
          for (int i = 0; i <= budget; i++) score[i] += s[i] / z + (pos[i] < n ? promptAcc[h][pos[i]] : 0);
        }
        int victim = 0;
        for (int i = 1; i < budget + 1 - recent; i++) if (score[i] < score[victim]) victim = i;
        expectedKept[g] = new int[budget];
        for (int i = 0, o = 0; i <= budget; i++) if (i != victim) expectedKept[g][o++] = pos[i];
      }
      for (int l = 0; l < 2; l++) policy.decode(l, q, n, kv, out, f.ctx);
      assertEquals(budget, kv.length(layer));
      for (int g = 0; g < f.c.numKvHeads(); g++) {
        for (int i = 0; i < budget; i++) assertEquals(expectedKept[g][i], kv.position(layer, i, g), "kv head " + g);
      }
    }
  }

  @Test
  void questSelectsPagesByTheMinMaxBoundPerHead() {
    try (Fixture f = new Fixture(45)) {
      int n = 100, page = 8, budget = 32, d = f.c.headDim();
      KvCache kv = f.cache(128, n);
      float[] q = f.rand(f.c.qDim()), out = new float[f.c.qDim()];
      new Quest(term("decode", "quest:page=8,budget=32,dense_layers=1"), new SelectionStats(2), f.ctx).decode(1, q, 99, kv, out, f.ctx);
      int full = (n - 1) / page, pick = budget / page - 1;
      for (int h = 0; h < f.c.numHeads(); h++) {
        int g = h / f.c.group();
        float[] qr = f.rotated(q, h * d, 99);
        float[] score = new float[full];
        for (int p = 0; p < full; p++) {
          for (int e = 0; e < d; e++) {
            float mn = Float.POSITIVE_INFINITY, mx = Float.NEGATIVE_INFINITY;
            for (int s = p * page; s < (p + 1) * page; s++) {
              float k = kv.ropedKeys[1][s * f.c.kvDim() + g * d + e];
              mn = Math.min(mn, k);
              mx = Math.max(mx, k);
            }
            score[p] += Math.max(qr[e] * mn, qr[e] * mx);
          }
        }
        int[] pages = TopKTest.bruteForce(score, pick);
        int[] list = new int[pick * page + (n - full * page)];
        int len = 0;
        for (int p : pages) for (int s = 0; s < page; s++) list[len++] = p * page + s;
        for (int s = full * page; s < n; s++) list[len++] = s;
        double[] ref = f.reference(kv, 1, q, h * d, 99, h, list, list);
        assertTrue(Fixture.relErr(out, h * d, ref) < 1e-4, "head " + h);
      }
    }
  }

  @Test
  void questDenseLayersAndFullBudgetAreDense() {
    try (Fixture f = new Fixture(46)) {
      KvCache kv = f.cache(128, 100);
      float[] q = f.rand(f.c.qDim()), dense = new float[f.c.qDim()];
      for (int layer = 0; layer < 2; layer++) {
        new DenseAttention().decode(layer, q, 99, kv, dense, f.ctx);
        String p = layer == 0 ? "quest:page=8,budget=16,dense_layers=1" : "quest:page=8,budget=104";
        float[] out = new float[f.c.qDim()];
        new Quest(term("decode", p), new SelectionStats(2), f.ctx).decode(layer, q, 99, kv, out, f.ctx);
        assertTrue(Fixture.relErr(out, dense) <= 1e-5, p);
      }
    }
  }

  @Test
  void compressionWithFullBudgetLeavesAttentionDense() {
    try (Fixture f = new Fixture(47)) {
      for (String p : new String[] {"snapkv:capacity=4096", "h2o:heavy=0.5,recent=0.5", "streaming:sinks=4,recent=200",
          "selkv:ratio=1"}) {
        KvCache kv = f.cache(128, 100);
        float[] q = f.rand(f.c.qDim()), before = new float[f.c.qDim()], after = new float[f.c.qDim()];
        new DenseAttention().decode(1, q, 99, kv, before, f.ctx);
        ComposedPolicy policy = ComposedPolicy.of(PolicySpec.parse(p));
        float[] prompt = f.rand(100 * f.c.qDim()), scratch = new float[100 * f.c.qDim()];
        KvCache empty = f.cache(128, 0);
        for (int l = 0; l < 2; l++) {
          empty.append(l, kv.keys[l], 0, kv.values[l], 0, 100, 0);
          policy.prefill(l, prompt, 100, 0, empty, scratch, f.ctx);
        }
        policy.afterPrefill(empty, f.ctx);
        policy.decode(1, q, 99, empty, after, f.ctx);
        assertEquals(100, empty.length(1), p);
        assertTrue(Fixture.relErr(after, before) <= 1e-5, p);
      }
    }
  }
}
