package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * TokenSelect's per-KV-head lists ({@code heads=kvhead}) go to the query heads that attend with
 * that KV head (h / group, HF repeat_kv), under both GQA scoring maps; and the diagnostic
 * {@code score=rope} votes with the true attention logits.
 */
class TokenSelectHeadsTest {

  static final int X = 40; // the slot only one head can see

  /**
   * 4 query heads / 2 KV heads: only query head 2 (attends with KV head 1; scores against KV head
   * 1 with gqa=div, KV head 0 with gqa=mod) has a non-zero query, and both KV heads' key at slot X
   * is aligned with its fingerprint. So X must be in list 1 (heads 2 and 3) and not in list 0
   * (heads 0 and 1, whose uniform votes pick the lowest candidates), and each head's output must
   * be attention over its own KV head's list.
   */
  @Test
  void perKvHeadListServesTheHeadsThatAttendWithThatKvHead() {
    for (String gqa : new String[] {"div", "mod"}) {
      for (boolean decode : new boolean[] {true, false}) {
        try (Fixture f = new Fixture(21)) {
          String params = "sinks=4,k=12,window=8,cache=off,scale=sqrt,heads=kvhead,gqa=" + gqa; // sqrt: no underflow in the votes
          PolicyTerm t = PolicySpec.parse("prefill=tokenselect:" + params).prefill();
          int m = decode ? 1 : 4, pos0 = decode ? 96 : 90, end = pos0 + m;
          KvCache kv = f.cache(128, decode ? 97 : 90);
          if (!decode) f.append(kv, m, 90);
          float[] q = new float[m * f.c.qDim()];
          int d = f.c.headDim(), heads = f.c.numHeads();
          for (int i = 0; i < m; i++) {
            for (int e = 0; e < d; e++) q[(i * heads + 2) * d + e] = (float) f.r.nextGaussian();
          }
          float[] qf = new float[d]; // head 2's fingerprint: rows rotated at window + i, averaged
          for (int i = 0; i < m; i++) {
            float[] x = f.rotated(q, (i * heads + 2) * d, 8 + i);
            for (int e = 0; e < d; e++) qf[e] += x[e] / m;
          }
          for (int g = 0; g < 2; g++) setKey(f, kv, X, g, qf, 10f);
          TokenSelect ts = TokenSelectTest.policy(f, params, new SelectionStats(2));
          float[] out = new float[m * f.c.qDim()];
          if (decode) ts.decode(1, q, pos0, kv, out, f.ctx);
          else ts.prefill(1, q, m, pos0, kv, out, f.ctx);
          int len = ts.lastListLen();
          int[] lists = ts.lastLists();
          String what = "gqa=" + gqa + (decode ? " decode" : " prefill");
          assertFalse(contains(lists, 0, len, X), what + ": list 0 (heads 0, 1) must not hold slot " + X);
          assertTrue(contains(lists, len, len, X), what + ": list 1 (heads 2, 3) must hold slot " + X);
          float[] ref = TokenSelectTest.reference(f, kv, 1, q, 0, m, pos0, end, t);
          assertTrue(Fixture.relErr(out, ref) < 1e-4, what + ": " + Fixture.relErr(out, ref));
        }
      }
    }
  }

  /** score=rope with scale=sqrt: the vote of one decode query is Σ_h softmax_c(q_h·k_c/√d) at real positions. */
  @Test
  void ropeScoreVotesWithTheTrueAttentionLogits() {
    try (Fixture f = new Fixture(22)) {
      KvCache kv = f.cache(128, 97);
      int d = f.c.headDim(), heads = f.c.numHeads(), sinks = 4, local = 8, cands = 97 - sinks - local;
      float[] q = f.rand(f.c.qDim()), out = new float[f.c.qDim()];
      TokenSelect ts = TokenSelectTest.policy(f, "sinks=4,k=12,window=8,cache=off,scale=sqrt,score=rope",
          new SelectionStats(2));
      ts.decode(0, q, 96, kv, out, f.ctx);
      float[] votes = ts.lastVotes();
      assertEquals(cands, votes.length);
      double[] want = new double[cands];
      for (int h = 0; h < heads; h++) {
        float[] qr = f.rotated(q, h * d, 96);
        double[] s = new double[cands];
        double max = Double.NEGATIVE_INFINITY, z = 0;
        for (int c = 0; c < cands; c++) {
          float[] k = f.rotated(kv.keys[0], (sinks + c) * f.c.kvDim() + (h / f.c.group()) * d, sinks + c);
          for (int e = 0; e < d; e++) s[c] += (double) qr[e] * k[e] / Math.sqrt(d);
          max = Math.max(max, s[c]);
        }
        for (int c = 0; c < cands; c++) z += s[c] = Math.exp(s[c] - max);
        for (int c = 0; c < cands; c++) want[c] += s[c] / z;
      }
      for (int c = 0; c < cands; c++) assertEquals(want[c], votes[c], 1e-5, "candidate " + c);
      // and it is not the neutral proxy's vote
      TokenSelect neutral = TokenSelectTest.policy(f, "sinks=4,k=12,window=8,cache=off,scale=sqrt",
          new SelectionStats(2));
      neutral.decode(0, q, 96, kv, new float[f.c.qDim()], f.ctx);
      float[] nv = neutral.lastVotes();
      double diff = 0;
      for (int c = 0; c < cands; c++) diff = Math.max(diff, Math.abs(nv[c] - votes[c]));
      assertTrue(diff > 1e-3, "score=rope voted like score=neutral");
    }
  }

  @Test
  void ropeScoreRefusesTheInt4Index() {
    try (Fixture f = new Fixture(23)) {
      assertThrows(IllegalArgumentException.class,
          () -> TokenSelectTest.policy(f, "score=rope,index=int4", new SelectionStats(2)));
    }
  }

  /** Sets the pre-RoPE key of KV head g at slot to scale · v / |v| and its rotated copy to match. */
  private static void setKey(Fixture f, KvCache kv, int slot, int g, float[] v, float scale) {
    int d = f.c.headDim(), o = slot * f.c.kvDim() + g * d;
    double norm = 0;
    for (float x : v) norm += (double) x * x;
    for (int e = 0; e < d; e++) kv.keys[1][o + e] = (float) (scale * v[e] / Math.sqrt(norm));
    float[] r = f.rotated(kv.keys[1], o, kv.positions[1][slot]);
    System.arraycopy(r, 0, kv.ropedKeys[1], o, d);
  }

  private static boolean contains(int[] a, int from, int len, int x) {
    return Arrays.stream(a, from, from + len).anyMatch(v -> v == x);
  }
}
