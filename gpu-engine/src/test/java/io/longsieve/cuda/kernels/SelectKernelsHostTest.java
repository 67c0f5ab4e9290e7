package io.longsieve.cuda.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Host side of TokenSelect on the GPU (runs without one): the scoring plan, pooled lengths, shape
 * checks, the top-k grid size, the constants shared with the kernels, and a step-by-step Java model of
 * ts_topk_lists (ts_topk.cu: G blocks per list; global digits of 11, 11, 10 bits from global histograms
 * (the first built by ts_votes or by the kernel) until the bin is small, taken whole or resolved; the
 * keys of a small bin compacted into a candidate buffer in arbitrary block order; a grid barrier; every
 * block refines among the candidates, takes its base from the blocks before it and writes in order)
 * against cpu/policy/TopK on heavily tied inputs, with the kernel's TK_CAP and with small ones.
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

  @ParameterizedTest(name = "threads={0} blocks={1} cap={2}")
  @CsvSource({"256, 64, 8192", "256, 32, 8192", "256, 32, 64", "256, 16, 300", "256, 1, 8192", "512, 9, 8192",
      "64, 7, 100", "32, 3, 8192", "32, 1, 16"})
  void topKModelMatchesTopKOnTiedInputs(int threads, int blocks, int cap) {
    Random r = new Random(3 + threads + 101 * blocks + cap);
    Arrays.fill(seen, 0);
    for (int trial = 0; trial < 240; trial++) {
      int n = 1 + r.nextInt(trial < 80 ? 300 : trial < 200 ? 5000 : 70000);
      int count = r.nextInt(4) == 0 ? r.nextInt(n + 3) : 1 + r.nextInt(Math.min(n, 3000));
      float[] v = tiedValues(r, n, trial % 7);
      int off = r.nextInt(4), sinks = r.nextInt(5), local = r.nextInt(6), end = sinks + n + local + r.nextInt(3);
      int[] want = io.longsieve.cpu.policy.TopKProbe.select(v, count, sinks);
      int[] top = filled(count), list = filled(sinks + count + local);
      kernelModel(v, count, threads, blocks, cap, off, sinks, local, end, top, list, trial % 2 == 0, r);
      String what = "trial " + trial + " n=" + n + " count=" + count + " off=" + off;
      assertArrayEquals(want, top, what);
      for (int i = 0; i < sinks; i++) assertEquals(i, list[i], what);
      for (int i = 0; i < count; i++) assertEquals(want[i], list[sinks + i], what);
      for (int i = 0; i < local; i++) assertEquals(end - local + i, list[sinks + count + i], what);
    }
    assertTrue(seen[0] > 0 && seen[1] > 0 && seen[2] > 0, "stops after every global digit: " + Arrays.toString(seen));
    assertTrue(seen[4] > 0 && seen[5] > 0, "refined, and refined with an early stop: " + Arrays.toString(seen));
    if (blocks > 1) assertTrue(seen[3] > 0, "blocks without picks skip the write: " + Arrays.toString(seen));
  }

  /**
   * Model runs whose global digits stopped after digit [0], [1], [2]; [3] blocks that skipped the
   * write; [4] runs refined among candidates, [5] of them stopping before the last digit (tests run
   * one at a time).
   */
  private static final int[] seen = new int[6];

  @Test
  void topKModelTakesTheLowestIndicesOfOneValue() {
    float[] zeros = new float[40000];  // underflowed votes: every key equal
    int[] top = filled(2048);
    kernelModel(zeros, 2048, 256, 19, 8192, 1, 0, 0, 40000, top, filled(2048), true, new Random(1));
    for (int i = 0; i < 2048; i++) assertEquals(i, top[i]);
    float[] v = new float[40000];
    for (int i = 0; i < v.length; i++) v[i] = (i % 7 == 3) ? 1f : (i % 2 == 0 ? 0f : -0f); // -0 ranks below +0
    top = filled(9000);
    kernelModel(v, 9000, 256, 32, 8192, 2, 5, 0, 40005, top, filled(9005), false, new Random(2));
    assertArrayEquals(io.longsieve.cpu.policy.TopKProbe.select(v, 9000, 5), top);
  }

  @ParameterizedTest(name = "n={0} lists={1} sms={2}")
  @CsvSource({"131072, 1, 132, 32", "131072, 8, 132, 16", "32768, 8, 132, 8", "5000, 1, 132, 2", "1, 1, 132, 1",
      "131072, 200, 132, 1", "131072, 8, 20, 2", "0, 1, 132, 1", "1048576, 1, 132, 64", "1048576, 2, 132, 64",
      "1048576, 3, 132, 44"})
  void topKBlocksAreAllResidentAtOnce(int n, int lists, int sms, int want) {
    int g = SelectKernels.topKBlocks(n, lists, sms);
    assertEquals(want, g);
    assertTrue(g == 1 || g * lists <= sms);
    assertTrue(g <= SelectKernels.TOPK_MAX_BLOCKS);
  }

  private static int[] filled(int n) {
    int[] a = new int[n];
    Arrays.fill(a, -1);
    return a;
  }

  /**
   * Kind 0: few levels; 1: one level and a few outliers; 2: gaussian; 3: +-0, negatives, inf, NaN; 4, 5:
   * spread; 6: flat (random-key votes: all within a few percent, so the first digit's bin is large).
   */
  static float[] tiedValues(Random r, int n, int kind) {
    float[] v = new float[n];
    int levels = 1 + r.nextInt(kind == 0 ? 4 : 1000);
    for (int i = 0; i < n; i++) {
      v[i] = switch (kind) {
        case 0 -> r.nextInt(levels) * 1e-3f;
        case 1 -> r.nextInt(50) == 0 ? r.nextFloat() : 0.25f;
        case 2 -> (float) r.nextGaussian();
        case 3 -> new float[] {0f, -0f, -1f, 2f, Float.POSITIVE_INFINITY, Float.NaN, Float.MIN_VALUE}[r.nextInt(7)];
        case 6 -> 1.1f + (float) r.nextGaussian() * 0.02f;
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
   * tk_resolve over one histogram: thread t of nt owns the bins 2047 - t*per down to 2047 - t*per -
   * per + 1; the one whose range holds the rem-th largest key finds the digit. Returns (digit, taken
   * from the bin, bin size); asserts that exactly one thread answers.
   */
  static int[] resolve(int[] hist, int rem, int nt) {
    int per = 2048 / nt, before = 0, found = 0;
    int[] pick = {0, 0, 0};
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
        pick = new int[] {digit, rem - acc, hist[digit]};
      }
      before += mine;
    }
    assertEquals(1, found, "exactly one resolving thread");
    return pick;
  }

  /**
   * ts_topk_lists for one list, block by block and thread by thread in sequence but with its
   * arithmetic: virtual indices shifted by off (the row's misalignment in floats), g blocks owning
   * slices of a multiple of 16 (TK_E) virtual indices, thread t of a tile owning 16 consecutive ones.
   * Global digits (11, 11, 10 bits): the histogram of digit 0 comes from ts_votes (prebuilt: every
   * value once) or from the blocks' shared histograms, later ones from the blocks' keys in the bin;
   * every block resolves the same digit from it (the grid barrier is the end of the loop over blocks);
   * stop when the bin is taken whole, resolved, or holds at most cap keys. Each block counts its keys
   * above and in the bin; to refine, it appends its keys in the bin per tile (thread order) to the
   * candidate buffer at a slot from a global atomic: the tiles land in an arbitrary order (shuffled
   * with `order`). Grid barrier. The refinement depends on the candidates as a multiset only, so every
   * block gets the same; then bases from the counts of the blocks before (refined by the candidates'
   * block fields), the skip of blocks without picks, and the ordered write with the packed (16-bit
   * greater, 16-bit equal) exclusive block scan per tile. Writes top (count) and list (sinks + count +
   * local).
   */
  static void kernelModel(float[] vals, int count, int nt, int g, int cap, int off, int sinks, int local, int end,
                          int[] top, int[] list, boolean prebuilt, Random order) {
    int n = vals.length, e16 = 16, tile = e16 * nt;
    for (int i = 0; i < sinks; i++) list[i] = i;
    for (int i = 0; i < local; i++) list[sinks + count + i] = end - local + i;
    if (count <= 0) return;
    if (count >= n) {
      for (int i = 0; i < count; i++) top[i] = list[sinks + i] = sinks + Math.max(0, Math.min(i, n - 1));
      return;
    }
    int hi = n + off, slice = ((hi + g - 1) / g + e16 - 1) / e16 * e16;
    long prefix = 0;
    int rem = count, shift = 21, m = n, pass = 0;
    boolean whole = false;
    for (;; pass++) {
      int sh = shiftOf(pass);
      long mask = pass == 2 ? 0x3FF : 0x7FF;
      int[] global = new int[2048];
      if (pass == 0 && prebuilt) {
        for (float x : vals) global[(int) (key(x) >>> 21)]++;
      } else {
        for (int b = 0; b < g; b++) {  // each block's shared histogram, then its non-zero bins added
          int[] hist = new int[2048];
          for (int j = Math.max(b * slice, off); j < Math.min(hi, b * slice + slice); j++) {
            long k = key(vals[j - off]);
            if (pass == 0 || (k >>> shift) == prefix) hist[(int) ((k >>> sh) & mask)]++;
          }
          for (int i = 0; i < 2048; i++) global[i] += hist[i];
        }
        // ---- grid barrier
      }
      int[] pick = resolve(global, rem, nt);
      prefix = pass == 0 ? pick[0] : ((prefix << (pass == 2 ? 10 : 11)) | pick[0]) & 0xFFFFFFFFL;
      rem = pick[1];
      m = Math.min(pick[2], n);
      whole = pick[2] == rem;
      shift = sh;
      if (whole || pass == 2 || m <= cap) break;
    }
    seen[pass]++;
    boolean refine = !whole && shift > 0;
    long low = (1L << shift) - 1;
    int[] gtBlock = new int[g], eqBlock = new int[g];
    List<int[]> chunks = new ArrayList<>();  // one per (block, tile) with candidates: one atomic each
    for (int b = 0; b < g; b++) {
      int s0 = b * slice, s1 = Math.min(hi, s0 + slice);
      for (int j0 = s0; j0 < s1; j0 += tile) {
        int[] chunk = new int[tile];
        int c = 0;
        for (int j = Math.max(j0, off); j < Math.min(s1, j0 + tile); j++) {
          long k = key(vals[j - off]);
          if ((k >>> shift) > prefix) gtBlock[b]++;
          if ((k >>> shift) == prefix) {
            eqBlock[b]++;
            chunk[c++] = (b << 21) | (int) (k & low);
          }
        }
        if (refine && c > 0) chunks.add(Arrays.copyOf(chunk, c));
      }
    }
    Collections.shuffle(chunks, order);
    int[] cand = chunks.stream().flatMapToInt(Arrays::stream).toArray();
    if (refine) {
      assertTrue(m <= cap, "a refined bin fits the candidate capacity");
      assertEquals(m, cand.length, "the candidates are the keys of the bin");
      seen[4]++;
    }
    // ---- grid barrier: every block refines among the same candidates
    long base = (prefix << shift) & 0xFFFFFFFFL, fPrefix = prefix;
    int fShift = shift;
    for (int fPass = pass + 1; refine && fPass < 3; fPass++) {
      int sh = shiftOf(fPass);
      long mask = fPass == 2 ? 0x3FF : 0x7FF;
      int[] hist = new int[2048];
      for (int c : cand) {
        long k = base | (c & low);
        if ((k >>> fShift) == fPrefix) hist[(int) ((k >>> sh) & mask)]++;
      }
      int[] pick = resolve(hist, rem, nt);
      fPrefix = ((fPrefix << (fPass == 2 ? 10 : 11)) | pick[0]) & 0xFFFFFFFFL;
      fShift = sh;
      rem = pick[1];
      if (pick[2] == pick[1]) {
        if (fPass < 2) seen[5]++;
        break;
      }
    }
    for (int b = 0; b < g; b++) {
      int gSeen = 0, eSeen = 0, gOwn = gtBlock[b], eOwn = refine ? 0 : eqBlock[b];
      for (int c = 0; c < b; c++) {
        gSeen += gtBlock[c];
        eSeen += refine ? 0 : eqBlock[c];
      }
      for (int c : cand) {
        int blk = c >>> 21;
        long s = (base | (c & low)) >>> fShift;
        if (blk < b) {
          gSeen += s > fPrefix ? 1 : 0;
          eSeen += s == fPrefix ? 1 : 0;
        } else if (blk == b) {
          gOwn += s > fPrefix ? 1 : 0;
          eOwn += s == fPrefix ? 1 : 0;
        }
      }
      if (gOwn == 0 && (eOwn == 0 || eSeen >= rem)) {
        seen[3]++;
        continue;
      }
      int s0 = b * slice, s1 = Math.min(hi, s0 + slice);
      for (int j0 = s0; j0 < s1; j0 += tile) {
        int[] gbits = new int[nt], ebits = new int[nt], packed = new int[nt];
        for (int t = 0; t < nt; t++) {
          for (int e = 0; e < e16; e++) {
            int j = j0 + e16 * t + e;
            if (j < off || j >= s1) continue;
            long s = key(vals[j - off]) >>> fShift;
            if (s > fPrefix) gbits[t] |= 1 << e;
            if (s == fPrefix) ebits[t] |= 1 << e;
          }
          packed[t] = Integer.bitCount(gbits[t]) | (Integer.bitCount(ebits[t]) << 16);
        }
        int ex = 0;
        for (int t = 0; t < nt; t++) {  // ex: the exclusive block scan of packed at thread t
          int gB = gSeen + (ex & 0xFFFF), eB = eSeen + (ex >>> 16);
          for (int e = 0; e < e16; e++) {
            boolean isG = ((gbits[t] >>> e) & 1) != 0, isE = ((ebits[t] >>> e) & 1) != 0;
            if (isG || (isE && eB < rem)) {
              int pos = gB + Math.min(eB, rem), s = sinks + (j0 + e16 * t + e - off);
              assertTrue(pos < count, "the kernel's bounds guard never drops a pick");
              assertEquals(-1, top[pos], "position written twice");
              top[pos] = s;
              list[sinks + pos] = s;
            }
            gB += isG ? 1 : 0;
            eB += isE ? 1 : 0;
          }
          ex += packed[t];
        }
        gSeen += ex & 0xFFFF;
        eSeen += ex >>> 16;
      }
    }
  }

  /** tk_shift: digit 0 is key >>> 21, digit 1 key >>> 10, digit 2 the low 10 bits. */
  private static int shiftOf(int pass) {
    return pass == 0 ? 21 : pass == 1 ? 10 : 0;
  }

  @Test
  void histogramInVotesOnlyForARealSelectionOnTheVotes() {
    assertTrue(SelectKernels.histogramInVotes(2048, 130000, 1));
    assertTrue(SelectKernels.histogramInVotes(1, 2, 0));
    assertFalse(SelectKernels.histogramInVotes(2048, 130000, 3), "pooled: the top-k reads other values");
    assertFalse(SelectKernels.histogramInVotes(0, 130000, 1), "count 0 never reads the votes");
    assertFalse(SelectKernels.histogramInVotes(2048, 2048, 1), "count >= n takes everything");
  }

  /** The launch and workspace constants are the kernels' #defines. */
  @Test
  void topKConstantsMatchTheKernels() throws IOException {
    String cuh = Files.readString(Path.of("src/main/cuda/select/ts_topk.cuh"));
    assertEquals(SelectKernels.TOPK_THREADS, KernelDefines.of("select/ts_topk_block.cuh", "TK_THREADS"));
    assertEquals(SelectKernels.TOPK_MAX_BLOCKS, KernelDefines.of("select/ts_topk.cuh", "TK_MAXG"));
    assertEquals(SelectKernels.TOPK_BINS, KernelDefines.of("select/ts_topk.cuh", "TK_BINS"));
    assertEquals(SelectKernels.TOPK_CAP, KernelDefines.of("select/ts_topk.cu", "TK_CAP"));
    assertTrue(cuh.contains("#define TK_GT (3 * TK_BINS + 32)") && cuh.contains("#define TK_EQ (TK_GT + TK_MAXG)")
        && cuh.contains("#define TK_WS (TK_EQ + TK_MAXG)"), "TK_WS = 3 * TK_BINS + 32 + 2 * TK_MAXG");
    assertEquals(SelectKernels.TOPK_WS, 3 * SelectKernels.TOPK_BINS + 32 + 2 * SelectKernels.TOPK_MAX_BLOCKS);
    assertTrue(SelectKernels.TOPK_MAX_BLOCKS < 2048, "block ids fit the candidates' 11-bit field");
    assertEquals(0, SelectKernels.TOPK_MIN_SLICE % (16 * SelectKernels.TOPK_THREADS), "whole tiles per slice");
  }

  /** ts_decode_front's reduction is sized by TSF_THREADS: the launch must use exactly that many threads. */
  @Test
  void frontThreadsMatchTheKernel() throws IOException {
    assertEquals(SelectKernels.FRONT_THREADS, KernelDefines.of("select/tokenselect.cu", "TSF_THREADS"));
  }
}
