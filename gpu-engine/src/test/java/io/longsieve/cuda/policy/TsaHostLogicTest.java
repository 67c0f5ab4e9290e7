package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cuda.kernels.TsaKernels;
import io.longsieve.policy.TsaKeep;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * GpuTsa's host logic on the CPU (no GPU): the activation condition, the proxy split plan, the
 * attended-pair count, and Java mirrors of the two selection kernels of tsa_select.cu (tsa_keep_count's
 * radix descent with fixed-point masses, tsa_select's radix top-k with ties to the lower slot)
 * against the CPU twin's sort-based definitions, with exact ties at the cut-off.
 */
class TsaHostLogicTest {

  @Test
  void activationIsTheCpuCondition() {
    // TokenSparseAttention: dense when !sparse || n <= 1 || min(window, n) < 1 || tau <= 0 || end <= min + window
    assertTrue(GpuTsa.active(true, 300, 1300, 0.005, 0, 1024, 128) == (1300 > 1152));
    assertTrue(GpuTsa.active(true, 2, 2000, 0.005, 0, 1024, 128));
    assertTrue(!GpuTsa.active(true, 1, 2000, 0.005, 0, 1024, 128));
    assertTrue(!GpuTsa.active(false, 300, 5000, 0.005, 0, 1024, 128));
    assertTrue(!GpuTsa.active(true, 300, 5000, 0, 0, 1024, 128));
    assertTrue(!GpuTsa.active(true, 300, 1152, 0.005, 0, 1024, 128));
    assertTrue(GpuTsa.active(true, 300, 1153, 0.005, 0, 1024, 128));
    assertTrue(!GpuTsa.active(true, 300, 5000, 0.005, 0, 1024, 0));
    // keep=F > 0 activates without tau, under the same other conditions
    assertTrue(GpuTsa.active(true, 300, 5000, 0, 0.25, 1024, 128));
    assertTrue(!GpuTsa.active(true, 300, 1152, 0, 0.25, 1024, 128));
    assertTrue(!GpuTsa.active(false, 300, 5000, 0, 0.25, 1024, 128));
  }

  @Test
  void fixedKeepIsTheCeilingOfTheShareAtLeastMin() {
    assertEquals(1250, TsaKeep.count(5000, 0.25, 1024));
    assertEquals(1251, TsaKeep.count(5001, 0.25, 1024));
    assertEquals(1024, TsaKeep.count(3000, 0.25, 1024));  // min binds
    assertEquals(7, TsaKeep.count(100, 0.07, 0));         // 0.07 * 100 is 7.000000000000001
    assertEquals(5000, TsaKeep.count(5000, 1.0, 1024));   // >= prefix: the caller runs dense
    assertEquals(32640, TsaKeep.count(131072 - 128 - 386, 0.25, 1024));
    assertTrue(TsaKeep.fixed(0.25) && !TsaKeep.fixed(0));
  }

  @Test
  void splitsCoverTheKeys() {
    for (int keys : new int[] {1, 63, 64, 65, 1000, 4097, 32768, 131072, 131072 + 128}) {
      for (int heads : new int[] {1, 8, 32}) {
        int chunk = TsaKernels.splitChunk(keys, heads, 132), splits = TsaKernels.splits(keys, chunk);
        assertEquals(0, chunk % 64, "chunk a multiple of the key tile");
        assertTrue(chunk >= 512);
        assertTrue((long) splits * chunk >= keys && (long) (splits - 1) * chunk < keys, keys + " keys, " + heads);
      }
    }
    assertEquals((128 + 128) * 136 * 2, TsaKernels.proxySmem(128));
    assertEquals(3, TsaKernels.gatherPages(129));
  }

  @Test
  void attendedPairsSumTheQueryEntries() {
    for (int len : new int[] {1, 5, 200}) {
      for (int f = 0; f <= len; f++) {
        double s = 0;
        for (int e = f; e < len; e++) s += e + 1;
        assertEquals(s, GpuTsa.attendedPairs(len, f), 0);
      }
    }
  }

  @Test
  void keepCountMatchesTheSortedCumulativeSum() {
    Random r = new Random(5);
    for (int trial = 0; trial < 300; trial++) {
      int n = 1 + r.nextInt(trial < 150 ? 300 : 5000);
      float[] g = new float[n];
      int kind = trial % 4;
      for (int j = 0; j < n; j++) {
        g[j] = switch (kind) {
          case 0 -> (float) Math.exp(r.nextGaussian() * 3);   // spread over many exponents
          case 1 -> 1f;                                       // all tied
          case 2 -> 1 + r.nextInt(4);                         // a few tied groups
          default -> r.nextInt(5) == 0 ? 0f : r.nextFloat();  // zeros in the tail
        };
      }
      double tau = r.nextDouble() * (r.nextBoolean() ? 0.05 : 0.9);
      int cpu = cpuDrop(g, tau), gpu = radixDrop(g, tau);
      assertEquals(cpu, gpu, "trial " + trial);  // (a cumulative mass within rounding of tau could differ; none here)
    }
    // exact ties at the cut-off: 1000 equal masses, tau between the 300th and 301st cumulative value
    float[] tied = new float[1000];
    Arrays.fill(tied, 0.5f);
    assertEquals(300, cpuDrop(tied, 0.3004));
    assertEquals(300, radixDrop(tied, 0.3004));
    assertEquals(0, radixDrop(tied, 0.0009));
    assertEquals(1000, radixDrop(tied, 1.5));
  }

  @Test
  void topKTakesTheLowerSlotsOfTies() {
    Random r = new Random(9);
    for (int trial = 0; trial < 200; trial++) {
      int n = 1 + r.nextInt(3000), keep = r.nextInt(n + 1);
      float[] p = new float[n];
      for (int j = 0; j < n; j++) p[j] = trial % 2 == 0 ? r.nextInt(6) * 0.25f : r.nextFloat();
      assertArrayEquals(sortTopK(p, keep), radixTopK(p, keep), "trial " + trial);
    }
  }

  /**
   * TsaParityTest's tied cases as the kernels see them (constant rotated keys: every per-head mass
   * equal; with pool 7 the three zero-padded slots at each end smaller): the radix mirrors give the
   * CPU's drop count and its lowest slots.
   */
  @Test
  void tiedMassesOfTheParityTestSelectTheLowestSlots() {
    float[] flat = new float[1172];
    Arrays.fill(flat, 1f / 128);  // pool 1: one value
    float[] pooled = new float[1565];
    for (int o = 0; o < pooled.length; o++) {
      int in = 0;
      for (int j = o - 3; j <= o + 3; j++) if (j >= 0 && j < pooled.length) in++;
      float s = 0;
      for (int x = 0; x < in; x++) s += 1f / 64;
      pooled[o] = s / 7;  // 4/7, 5/7, 6/7 of the interior value at the edges
    }
    for (Object[] c : new Object[][] {{flat, 0.3004}, {pooled, 0.2502}}) {
      float[] p = (float[]) c[0];
      double tau = (double) c[1];
      int drop = cpuDrop(p, tau);
      assertEquals(drop, radixDrop(p, tau));
      int keep = Math.max(64, p.length - drop - 1);
      int[] top = radixTopK(p, keep);
      assertArrayEquals(sortTopK(p, keep), top);
      int first = p == flat ? 0 : 3;  // the edges rank below the interior
      for (int i = 0; i < keep; i++) assertEquals(first + i, top[i], "lowest slots of the tied value");
    }
  }

  // ---- CPU twin definitions (TokenSparseAttention.keepCount, TopK.select) ----

  /** n_drop before the +1: g normalised, ascending, equal masses higher slot first, fp32 sum while < tau. */
  static int cpuDrop(float[] g, double tau) {
    double total = 0;
    for (float x : g) total += x;
    float inv = (float) (1.0 / (total + 1e-8));
    Integer[] idx = new Integer[g.length];
    for (int j = 0; j < g.length; j++) idx[j] = j;
    Arrays.sort(idx, (a, b) -> g[a] != g[b] ? Float.compare(g[a] * inv, g[b] * inv) : Integer.compare(b, a));
    float cum = 0;
    int drop = 0;
    for (Integer j : idx) {
      cum += g[j] * inv;
      if (cum < tau) drop++;
      else break;
    }
    return drop;
  }

  static int[] sortTopK(float[] p, int keep) {
    Integer[] idx = new Integer[p.length];
    for (int j = 0; j < p.length; j++) idx[j] = j;
    Arrays.sort(idx, (a, b) -> p[a] != p[b] ? Float.compare(p[b], p[a]) : Integer.compare(a, b));
    int[] out = new int[keep];
    for (int i = 0; i < keep; i++) out[i] = idx[i];
    Arrays.sort(out);
    return out;
  }

  // ---- mirrors of tsa_select.cu ----

  static long key(float f) {
    int b = Float.floatToRawIntBits(f);
    return (b < 0 ? ~b : (b | 0x80000000)) & 0xFFFFFFFFL;
  }

  static float unkey(long u) {
    int x = (int) u;
    return Float.intBitsToFloat((x & 0x80000000) != 0 ? (x & 0x7fffffff) : ~x);
  }

  static final double FX = 1099511627776.0;

  static long fx(float v) {
    return v > 0 ? (long) ((double) v * FX) : 0;
  }

  /** tsa_keep_count's n_drop. */
  static int radixDrop(float[] g, double tau) {
    double total = 0;
    for (float x : g) total += x;
    float inv = (float) (1.0 / (total + 1e-8));
    long tauFx = tau > 0 ? (long) (tau * FX) : 0;
    if (tauFx == 0) return 0;
    long pfx = 0, belowMass = 0;
    int belowCount = 0, tie = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      long[] hm = new long[256];
      int[] hc = new int[256];
      for (float x : g) {
        long u = key(x * inv);
        if (shift == 24 || (u >>> (shift + 8)) == (pfx >>> (shift + 8))) {
          int b = (int) ((u >>> shift) & 255);
          hc[b]++;
          hm[b] += fx(x * inv);
        }
      }
      int found = -1;
      for (int b = 0; b < 256; b++) {
        if (hc[b] == 0) continue;
        if (belowMass + hm[b] < tauFx) {
          belowMass += hm[b];
          belowCount += hc[b];
        } else {
          found = b;
          break;
        }
      }
      if (found < 0) return belowCount;
      pfx |= (long) found << shift;
      tie = hc[found];
    }
    long vfx = fx(unkey(pfx)), room = tauFx - belowMass - 1;
    long k = vfx == 0 ? tie : Math.min(tie, room / vfx);
    return (int) (belowCount + k);
  }

  /** tsa_select's list (without the window). */
  static int[] radixTopK(float[] p, int keep) {
    long pfx = 0;
    int above = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      int[] hc = new int[256];
      for (float x : p) {
        long u = key(x);
        if (shift == 24 || (u >>> (shift + 8)) == (pfx >>> (shift + 8))) hc[(int) ((u >>> shift) & 255)]++;
      }
      for (int b = 255; b >= 0; b--) {
        if (above + hc[b] >= keep) {
          pfx |= (long) b << shift;
          break;
        }
        above += hc[b];
      }
    }
    int ties = keep - above, tieRank = 0, pos = 0;
    int[] out = new int[keep];
    for (int j = 0; j < p.length; j++) {
      long u = key(p[j]);
      boolean tie = u == pfx;
      if (u > pfx || (tie && tieRank < ties)) out[pos++] = j;
      if (tie) tieRank++;
    }
    assertEquals(keep, pos);
    return out;
  }
}
