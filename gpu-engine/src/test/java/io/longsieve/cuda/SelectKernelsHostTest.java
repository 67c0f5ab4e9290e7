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
 * checks, and a line-by-line Java model of the ts_topk_* kernels' algorithm (radix select on two
 * 16-bit digits, then per-block and per-warp segment ordered output) against a brute-force top-k.
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
      assertArrayEquals(bruteForce(v, k), kernelModel(v, k, 256), "n=" + n + " k=" + k);
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

  /**
   * The ts_topk_* kernels step by step without the parallelism: two 16-bit radix passes (hist,
   * resolve), per-block segment counts, then each block's warps writing their segments in order.
   */
  static int[] kernelModel(float[] v, int count, int blockDim) {
    int n = v.length, nw = blockDim / 32;
    long[] state = new long[2];
    for (int pass = 0; pass < 2; pass++) {
      int[] hist = new int[65536];
      for (int i = 0; i < n; i++) {
        long u = key(v[i]);
        if (pass == 0 || (u >> 16) == state[0]) hist[(int) (pass == 1 ? u & 0xFFFF : u >> 16)]++;
      }
      int rem = pass == 1 ? (int) state[1] : count;
      // resolve: thread t owns `per` bins from the top down; the one whose range holds rem finds the digit
      int threads = 1024, per = 65536 / threads, before = 0;
      for (int t = 0; t < threads; t++) {
        int top = 65535 - t * per, mine = 0;
        for (int j = 0; j < per; j++) mine += hist[top - j];
        if (before < rem && rem <= before + mine) {
          int acc = before, digit = top - per + 1;
          for (int j = 0; j < per; j++) {
            if (acc + hist[top - j] >= rem) {
              digit = top - j;
              break;
            }
            acc += hist[top - j];
          }
          state[0] = pass == 1 ? (state[0] << 16) | digit : digit;
          state[1] = rem - acc;
        }
        before += mine;
      }
    }
    long t = state[0];
    int need = (int) state[1];
    int blocks = SelectKernels.topKBlocks(n), seg = ((n + blocks - 1) / blocks + 31) / 32 * 32;
    int[][] counts = new int[blocks][2];
    for (int b = 0; b < blocks; b++) {
      for (int i = Math.min(n, b * seg); i < Math.min(n, Math.min(n, b * seg) + seg); i++) {
        if (key(v[i]) > t) counts[b][0]++;
        if (key(v[i]) == t) counts[b][1]++;
      }
    }
    int[] out = new int[count];
    for (int b = 0; b < blocks; b++) {
      int gB = 0, eB = 0;
      for (int x = 0; x < b; x++) {
        gB += counts[x][0];
        eB += counts[x][1];
      }
      int b0 = Math.min(n, b * seg), b1 = Math.min(n, b0 + seg);
      int wseg = ((b1 - b0 + nw - 1) / nw + 31) / 32 * 32;
      int[] wG = new int[nw], wE = new int[nw];
      for (int w = 0; w < nw; w++) {
        int s0 = Math.min(b1, b0 + w * wseg), s1 = Math.min(b1, s0 + wseg);
        for (int i = s0; i < s1; i++) {
          if (key(v[i]) > t) wG[w]++;
          if (key(v[i]) == t) wE[w]++;
        }
      }
      for (int w = 0; w < nw; w++) {
        int gBefore = gB, eSeen = eB;
        for (int x = 0; x < w; x++) {
          gBefore += wG[x];
          eSeen += wE[x];
        }
        int pos = gBefore + Math.min(eSeen, need);
        int s0 = Math.min(b1, b0 + w * wseg), s1 = Math.min(b1, s0 + wseg);
        for (int i = s0; i < s1; i++) {
          long u = key(v[i]);
          boolean sel = u > t || (u == t && eSeen < need);
          if (u == t) eSeen++;
          if (sel) out[pos++] = i;
        }
      }
    }
    return out;
  }
}
