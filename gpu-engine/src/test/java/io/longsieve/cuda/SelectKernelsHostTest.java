package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Comparator;
import java.util.Random;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Host side of TokenSelect on the GPU (runs without one): the scoring plan, pooled lengths, shape
 * checks, and a line-by-line Java model of the ts_topk kernel's algorithm (radix select on 8-bit
 * digits, then the per-warp-segment ordered output) against a brute-force top-k.
 */
class SelectKernelsHostTest {

  @ParameterizedTest(name = "cands={0} nKv={1}")
  @CsvSource({"1, 8", "63, 8", "1000, 2", "130000, 8", "130000, 1", "5000, 32"})
  void scorePlanCoversEveryCandidateOnce(int cands, int nKv) {
    SelectKernels.ScorePlan p = SelectKernels.scorePlan(cands, nKv, 132);
    assertEquals(0, p.chunk() % 64);
    assertTrue((long) p.chunk() * p.splits() >= cands);
    assertTrue(p.splits() == 1 || (long) p.chunk() * (p.splits() - 1) < cands, "no empty split " + p);
    if (cands >= 64 * 132 * 4) assertTrue(p.splits() * nKv >= 132, "fills the GPU: " + p);
  }

  @Test
  void pooledLengthIsTorchs() {
    assertEquals(100, SelectKernels.pooledLength(100, 3));
    assertEquals(99, SelectKernels.pooledLength(100, 4));
    assertEquals(100, SelectKernels.pooledLength(100, 1));
  }

  @Test
  void shapesOutsideTheKernelsAreRefused() {
    SelectKernels.checkShape(128, 32, 8);
    SelectKernels.checkShape(64, 8, 1);
    assertThrows(IllegalArgumentException.class, () -> SelectKernels.checkShape(96, 8, 2));
    assertThrows(IllegalArgumentException.class, () -> SelectKernels.checkShape(128, 32, 2));
  }

  @Test
  void topKAlgorithmMatchesBruteForceWithTies() {
    Random r = new Random(3);
    for (int trial = 0; trial < 200; trial++) {
      int n = 1 + r.nextInt(trial < 100 ? 300 : 40000);
      int k = 1 + r.nextInt(Math.max(1, n - 1));
      float[] v = new float[n];
      int levels = 1 + r.nextInt(trial % 3 == 0 ? 4 : 1000); // few levels: many ties
      for (int i = 0; i < n; i++) v[i] = trial % 5 == 0 ? (float) r.nextGaussian() : r.nextInt(levels) * 1e-3f;
      if (k >= n) continue;
      assertArrayEquals(bruteForce(v, k), kernelModel(v, k, 1024), "n=" + n + " k=" + k);
      assertArrayEquals(bruteForce(v, k), kernelModel(v, k, 64), "n=" + n + " k=" + k + " (2 warps)");
    }
  }

  static int[] bruteForce(float[] v, int k) {
    Integer[] idx = IntStream.range(0, v.length).boxed().toArray(Integer[]::new);
    Arrays.sort(idx, Comparator.<Integer>comparingInt(i -> -1).thenComparing((a, b) ->
        Float.compare(v[b], v[a]) != 0 ? Float.compare(v[b], v[a]) : Integer.compare(a, b)));
    int[] top = new int[k];
    for (int i = 0; i < k; i++) top[i] = idx[i];
    Arrays.sort(top);
    return top;
  }

  static long key(float f) {
    int b = Float.floatToRawIntBits(f);
    return (b < 0 ? ~b : (b | 0x80000000)) & 0xFFFFFFFFL;
  }

  /** ts_topk step by step (blockDim threads, warps of 32) without the parallelism. */
  static int[] kernelModel(float[] v, int count, int blockDim) {
    int n = v.length, nw = blockDim / 32;
    long prefix = 0, mask = 0;
    int remaining = count;
    for (int shift = 24; shift >= 0; shift -= 8) {
      int[] hist = new int[256];
      for (int i = 0; i < n; i++) {
        long u = key(v[i]);
        if ((u & mask) == prefix) hist[(int) ((u >> shift) & 255)]++;
      }
      int acc = 0, d = 255;
      for (; d > 0; d--) {
        if (acc + hist[d] >= remaining) break;
        acc += hist[d];
      }
      prefix |= (long) d << shift;
      mask |= 0xFFL << shift;
      remaining -= acc;
    }
    long t = prefix;
    int need = remaining;
    int seg = ((n + nw - 1) / nw + 31) / 32 * 32;
    int[] wG = new int[nw], wE = new int[nw];
    for (int w = 0; w < nw; w++) {
      int s0 = Math.min(n, w * seg), s1 = Math.min(n, s0 + seg);
      for (int i = s0; i < s1; i++) {
        if (key(v[i]) > t) wG[w]++;
        if (key(v[i]) == t) wE[w]++;
      }
    }
    int[] out = new int[count];
    for (int w = 0; w < nw; w++) {
      int gBefore = 0, eSeen = 0;
      for (int x = 0; x < w; x++) {
        gBefore += wG[x];
        eSeen += wE[x];
      }
      int pos = gBefore + Math.min(eSeen, need);
      int s0 = Math.min(n, w * seg), s1 = Math.min(n, s0 + seg);
      for (int i = s0; i < s1; i++) {
        long u = key(v[i]);
        boolean sel = u > t || (u == t && eSeen < need);
        if (u == t) eSeen++;
        if (sel) out[pos++] = i;
      }
    }
    return out;
  }
}
