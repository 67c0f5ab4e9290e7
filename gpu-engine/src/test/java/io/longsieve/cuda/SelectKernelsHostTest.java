package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Host side of TokenSelect on the GPU (runs without one): the scoring plan, pooled lengths, shape
 * checks, and a line-by-line Java model of ts_topk_lists (ts_topk.cu: radix select on 11/11/10-bit
 * digits, then one ordered write from block scans) against attention/TopK on heavily tied inputs.
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

  @ParameterizedTest(name = "threads={0}")
  @CsvSource({"1024", "64", "32"})
  void topKModelMatchesTopKOnTiedInputs(int threads) {
    Random r = new Random(3 + threads);
    Arrays.fill(pass2, 0);
    for (int trial = 0; trial < 240; trial++) {
      int n = 1 + r.nextInt(trial < 80 ? 300 : trial < 200 ? 5000 : 70000);
      int count = r.nextInt(4) == 0 ? r.nextInt(n + 3) : 1 + r.nextInt(Math.min(n, 3000));
      float[] v = tiedValues(r, n, trial % 6);
      int off = r.nextInt(4), sinks = r.nextInt(5), local = r.nextInt(6), end = sinks + n + local + r.nextInt(3);
      int[] want = io.longsieve.attention.TopKProbe.select(v, count, sinks);
      int[] top = filled(count), list = filled(sinks + count + local);
      kernelModel(v, count, threads, off, sinks, local, end, top, list);
      String what = "trial " + trial + " n=" + n + " count=" + count + " off=" + off;
      assertArrayEquals(want, top, what);
      for (int i = 0; i < sinks; i++) assertEquals(i, list[i], what);
      for (int i = 0; i < count; i++) assertEquals(want[i], list[sinks + i], what);
      for (int i = 0; i < local; i++) assertEquals(end - local + i, list[sinks + count + i], what);
    }
    assertTrue(pass2[0] > 0 && pass2[1] > 0, "pass 2 both from shared memory and from the votes: " + pass2[0] + ", "
        + pass2[1]);
  }

  /** Model runs of pass 2 from the gathered keys [0] and from the votes [1] (tests run one at a time). */
  private static final int[] pass2 = new int[2];

  @Test
  void topKModelTakesTheLowestIndicesOfOneValue() {
    float[] zeros = new float[40000];  // underflowed votes: every key equal
    int[] top = filled(2048);
    kernelModel(zeros, 2048, 1024, 1, 0, 0, 40000, top, filled(2048));
    for (int i = 0; i < 2048; i++) assertEquals(i, top[i]);
    float[] v = new float[40000];
    for (int i = 0; i < v.length; i++) v[i] = (i % 7 == 3) ? 1f : (i % 2 == 0 ? 0f : -0f); // -0 ranks below +0
    top = filled(9000);
    kernelModel(v, 9000, 1024, 2, 5, 0, 40005, top, filled(9005));
    assertArrayEquals(io.longsieve.attention.TopKProbe.select(v, 9000, 5), top);
  }

  private static int[] filled(int n) {
    int[] a = new int[n];
    Arrays.fill(a, -1);
    return a;
  }

  /** Kind 0: few levels; 1: one level and a few outliers; 2: gaussian; 3: +-0, negatives, inf, NaN; 4, 5: spread. */
  static float[] tiedValues(Random r, int n, int kind) {
    float[] v = new float[n];
    int levels = 1 + r.nextInt(kind == 0 ? 4 : 1000);
    for (int i = 0; i < n; i++) {
      v[i] = switch (kind) {
        case 0 -> r.nextInt(levels) * 1e-3f;
        case 1 -> r.nextInt(50) == 0 ? r.nextFloat() : 0.25f;
        case 2 -> (float) r.nextGaussian();
        case 3 -> new float[] {0f, -0f, -1f, 2f, Float.POSITIVE_INFINITY, Float.NaN, Float.MIN_VALUE}[r.nextInt(7)];
        default -> r.nextFloat() * (1 << r.nextInt(20)) * 1e-6f;
      };
    }
    return v;
  }

  /** Unsigned key of ts_topk.cu's tk_key (TopK.sortable + 2^31) in the low 32 bits of a long. */
  static long key(float f) {
    int b = Float.floatToRawIntBits(f);
    return (b < 0 ? ~b : (b | 0x80000000)) & 0xFFFFFFFFL;
  }

  /**
   * ts_topk_lists for one list, step by step without the parallelism but with its arithmetic: the
   * virtual indices shifted by off (the row's misalignment in floats), three radix passes (11, 11,
   * 10 bits) with the per-thread descending bin ranges of the resolve and the early stop on a bin
   * taken whole, then the ordered write in tiles of TK_U sub-tiles with the byte-packed warp scans,
   * warp 0's 16-bit fields and the sub-tile bases. Writes top (count) and list (sinks + count + local).
   */
  static void kernelModel(float[] vals, int count, int nt, int off, int sinks, int local, int end, int[] top,
                          int[] list) {
    int n = vals.length, nw = nt / 32;
    for (int i = 0; i < sinks; i++) list[i] = i;
    for (int i = 0; i < local; i++) list[sinks + count + i] = end - local + i;
    if (count <= 0) return;
    if (count >= n) {
      for (int i = 0; i < count; i++) top[i] = list[sinks + i] = sinks + Math.max(0, Math.min(i, n - 1));
      return;
    }
    int hi = n + off, quad = 4 * nt, step = 4 * quad;
    long prefix = 0;
    int rem = count, shift = 21;
    boolean gather = false;
    long[] cand = new long[8192]; // TK_CAP
    int sCount = 0;
    for (int pass = 0; pass < 3; pass++) {
      int sh = pass == 0 ? 21 : pass == 1 ? 10 : 0;
      long mask = pass == 2 ? 0x3FF : 0x7FF;
      int[] hist = new int[2048];
      if (pass == 2) pass2[gather ? 0 : 1]++;
      if (pass == 2 && gather) {  // from the keys pass 1 gathered
        for (int i = 0; i < sCount; i++) {
          if ((cand[i] >>> shift) == prefix) hist[(int) ((cand[i] >>> sh) & mask)]++;
        }
      } else {
        for (int j = off; j < hi; j++) {
          long k = key(vals[j - off]);
          if (pass == 0 || (k >>> shift) == prefix) {
            hist[(int) ((k >>> sh) & mask)]++;
            if (pass == 1 && gather) cand[sCount++] = k;
          }
        }
      }
      int per = 2048 / nt, before = 0, found = 0;
      long nPrefix = 0;
      int nRem = 0;
      boolean done = false;
      for (int t = 0; t < nt; t++) {
        int topBin = 2047 - t * per, mine = 0;
        for (int q = 0; q < per; q++) mine += hist[topBin - q];
        if (before < rem && rem <= before + mine) {
          found++;
          int acc = before, digit = topBin - per + 1;
          for (int q = 0; q < per; q++) {
            int c = hist[topBin - q];
            if (acc + c >= rem) {
              digit = topBin - q;
              break;
            }
            acc += c;
          }
          nPrefix = ((prefix << (pass == 2 ? 10 : 11)) | digit) & 0xFFFFFFFFL;
          nRem = rem - acc;
          done = pass == 2 || hist[digit] == rem - acc;
          if (pass == 0) gather = hist[digit] <= cand.length;
        }
        before += mine;
      }
      assertEquals(1, found, "exactly one resolving thread");
      prefix = nPrefix;
      rem = nRem;
      shift = sh;
      if (done) break;
    }
    int gtTotal = count - rem, gtSeen = 0, eqSeen = 0;
    for (int j0 = 0; j0 < hi; j0 += step) {
      int[] gbits = new int[nt], ebits = new int[nt], gw = new int[nt], ew = new int[nt];
      for (int t = 0; t < nt; t++) {
        for (int u = 0; u < 4; u++) {
          for (int e = 0; e < 4; e++) {
            int j = j0 + u * quad + 4 * t + e;
            if (j < off || j >= hi) continue;
            long s = key(vals[j - off]) >>> shift;
            if (s > prefix) gbits[t] |= 1 << (u * 4 + e);
            if (s == prefix) ebits[t] |= 1 << (u * 4 + e);
          }
          gw[t] |= Integer.bitCount((gbits[t] >>> (u * 4)) & 15) << (8 * u);
          ew[t] |= Integer.bitCount((ebits[t] >>> (u * 4)) & 15) << (8 * u);
        }
      }
      int[] gi = warpInclusive(gw, nt), ei = warpInclusive(ew, nt);
      int[][] pre = new int[2][nt / 32 * 4];
      int[][] base = new int[2][5];
      for (int f = 0; f < 2; f++) {
        int[] lo = new int[32], hi2 = new int[32];
        for (int lane = 0; lane < 32; lane++) {
          int x = lane < nw ? (f == 0 ? gi : ei)[lane * 32 + 31] : 0;
          lo[lane] = (x & 0xFF) | (((x >>> 8) & 0xFF) << 16);
          hi2[lane] = ((x >>> 16) & 0xFF) | ((x >>> 24) << 16);
        }
        int[] loI = warpInclusive(lo, 32), hiI = warpInclusive(hi2, 32);
        for (int lane = 0; lane < nw; lane++) {
          int loE = loI[lane] - lo[lane], hiE = hiI[lane] - hi2[lane];
          pre[f][lane * 4] = loE & 0xFFFF;
          pre[f][lane * 4 + 1] = loE >>> 16;
          pre[f][lane * 4 + 2] = hiE & 0xFFFF;
          pre[f][lane * 4 + 3] = hiE >>> 16;
        }
        int t0 = loI[31] & 0xFFFF, t1 = loI[31] >>> 16, t2 = hiI[31] & 0xFFFF, t3 = hiI[31] >>> 16;
        base[f] = new int[] {0, t0, t0 + t1, t0 + t1 + t2, t0 + t1 + t2 + t3};
      }
      for (int t = 0; t < nt; t++) {
        int warp = t / 32;
        for (int u = 0; u < 4; u++) {
          if ((((gbits[t] | ebits[t]) >>> (u * 4)) & 15) == 0) continue;  // no pick: skipped
          int gB = gtSeen + base[0][u] + pre[0][warp * 4 + u] + ((gi[t] >>> (8 * u)) & 0xFF)
              - ((gw[t] >>> (8 * u)) & 0xFF);
          int eB = eqSeen + base[1][u] + pre[1][warp * 4 + u] + ((ei[t] >>> (8 * u)) & 0xFF)
              - ((ew[t] >>> (8 * u)) & 0xFF);
          for (int e = 0; e < 4; e++) {
            boolean isG = ((gbits[t] >>> (u * 4 + e)) & 1) != 0, isE = ((ebits[t] >>> (u * 4 + e)) & 1) != 0;
            if (isG || (isE && eB < rem)) {
              int pos = gB + Math.min(eB, rem), s = sinks + (j0 + u * quad + 4 * t + e - off);
              assertEquals(-1, top[pos], "position written twice");
              top[pos] = s;
              list[sinks + pos] = s;
            }
            gB += isG ? 1 : 0;
            eB += isE ? 1 : 0;
          }
        }
      }
      gtSeen += base[0][4];
      eqSeen += base[1][4];
      if (gtSeen == gtTotal && eqSeen >= rem) break;
    }
  }

  /** tk_warp_incl on every warp of x (nt values): 32-bit wrap-around sums within each warp. */
  private static int[] warpInclusive(int[] x, int nt) {
    int[] y = new int[nt];
    for (int w = 0; w < nt; w += 32) {
      int acc = 0;
      for (int lane = 0; lane < 32; lane++) y[w + lane] = acc += x[w + lane];
    }
    return y;
  }
}
