package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.SelectionStats;
import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** TokenSelect's {@code index=int4} scoring copy: the quantiser, and selection overlap with full keys. */
class TokenSelectInt4Test {

  @Test
  void quantiserIsSymmetricRoundHalfUpAndClamped() {
    float[] x = {0.7f, -0.7f, 0.05f, -0.05f, 0.3499f, 0f, 0.25f, -0.15f};
    byte[] q = new byte[8];
    float s = Int4KeyIndex.quantise(x, 0, 8, q, 0);
    assertEquals(0.7f / 7f, s);
    // 0.05 / 0.1 = 0.5 rounds up, -0.5 rounds up to 0 (floor(x + 0.5)), as the GPU kernel does
    assertArrayEquals(new byte[] {7, -7, 1, 0, 3, 0, 3, -1}, q);
    byte[] z = new byte[3];
    assertEquals(0f, Int4KeyIndex.quantise(new float[3], 0, 3, z, 0));
    assertArrayEquals(new byte[3], z);
  }

  @Test
  void int4PicksMostlyTheSameTokensAsFullKeys() {
    try (Fixture f = new Fixture(2, 8, 2, 64, 21)) {
      int n = 3000;
      KvCache kv = f.cache(n + 8, n);
      double overlap = 0;
      int trials = 0;
      for (int step = 0; step < 4; step++) {
        float[] q = f.rand(f.c.qDim());
        for (int i = 0; i < q.length; i++) q[i] *= 0.3f; // peaked but not one-hot votes
        TokenSelect full = TokenSelectTest.policy(f, "sinks=4,k=256,window=32,cache=off", new SelectionStats(2));
        TokenSelect int4 = TokenSelectTest.policy(f, "sinks=4,k=256,window=32,cache=off,index=int4", new SelectionStats(2));
        float[] o1 = new float[f.c.qDim()], o2 = new float[f.c.qDim()];
        full.decode(step % 2, q, n - 1, kv, o1, f.ctx);
        int4.decode(step % 2, q, n - 1, kv, o2, f.ctx);
        overlap += overlap(full.lastLists(), int4.lastLists());
        trials++;
      }
      overlap /= trials;
      System.out.printf("int4 vs full-key TokenSelect selection overlap: %.3f%n", overlap);
      assertTrue(overlap >= 0.8, "overlap " + overlap);
      assertTrue(overlap < 1.0, "int4 should differ a little on random keys");
    }
  }

  @Test
  void keysOnTheInt4GridSelectExactlyAsFullKeys() {
    try (Fixture f = new Fixture(2, 4, 2, 16, 22)) {
      int n = 600, kvDim = f.c.kvDim(), d = f.c.headDim();
      KvCache kv = new KvCache(f.c, f.rope, n + 4);
      for (int l = 0; l < 2; l++) {
        float[] k = new float[n * kvDim];
        for (int i = 0; i < k.length; i++) k[i] = (f.r.nextInt(15) - 7) * 0.125f;
        for (int s = 0; s < n * 2; s++) k[s * d] = 7 * 0.125f; // every (slot, head) reaches the max: scale 0.125
        kv.append(l, k, 0, f.rand(n * kvDim), 0, n, 0);
      }
      float[] q = f.rand(f.c.qDim());
      TokenSelect full = TokenSelectTest.policy(f, "sinks=4,k=40,window=8,cache=off", new SelectionStats(2));
      TokenSelect int4 = TokenSelectTest.policy(f, "sinks=4,k=40,window=8,cache=off,index=int4", new SelectionStats(2));
      float[] o1 = new float[f.c.qDim()], o2 = new float[f.c.qDim()];
      full.decode(1, q, n - 1, kv, o1, f.ctx);
      int4.decode(1, q, n - 1, kv, o2, f.ctx);
      assertTrue(overlap(full.lastLists(), int4.lastLists()) >= 0.97);
      assertTrue(Fixture.relErr(o1, o2) < 1e-3 || overlap(full.lastLists(), int4.lastLists()) < 1);
    }
  }

  @Test
  void indexFollowsAppendsAndIsRebuiltAfterReset() {
    try (Fixture f = new Fixture(2, 4, 2, 16, 23)) {
      KvCache kv = f.cache(400, 300);
      String p = "sinks=4,k=32,window=8,cache=off,index=int4";
      TokenSelect inc = TokenSelectTest.policy(f, p, new SelectionStats(2));
      float[] q = f.rand(f.c.qDim()), out = new float[f.c.qDim()];
      inc.decode(0, q, 299, kv, out, f.ctx);
      f.append(kv, 50, 300);
      inc.decode(0, q, 349, kv, out, f.ctx);
      // a fresh policy quantises everything at once: same index, same selection
      TokenSelect fresh = TokenSelectTest.policy(f, p, new SelectionStats(2));
      float[] out2 = new float[f.c.qDim()];
      fresh.decode(0, q, 349, kv, out2, f.ctx);
      assertArrayEquals(fresh.lastLists(), inc.lastLists());
      // overwrite slots in place (as compression would), reset: the index must see the new keys
      for (int i = 0; i < 350 * f.c.kvDim(); i++) kv.keys[0][i] = -kv.keys[0][i];
      inc.reset();
      inc.decode(0, q, 349, kv, out, f.ctx);
      TokenSelect fresh2 = TokenSelectTest.policy(f, p, new SelectionStats(2));
      fresh2.decode(0, q, 349, kv, out2, f.ctx);
      assertArrayEquals(fresh2.lastLists(), inc.lastLists());
    }
  }

  /** |A ∩ B| / |A| over all lists, as sets per list. */
  static double overlap(int[] a, int[] b) {
    assertEquals(a.length, b.length);
    Set<Integer> sb = new HashSet<>();
    for (int x : b) sb.add(x);
    int hit = 0;
    for (int x : a) if (sb.contains(x)) hit++;
    return (double) hit / a.length;
  }
}
