package io.longsieve.cuda.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.driver.DeviceBuffer;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * ts_score_d* / ts_score_int4_d* (ts_score.cu, ts_score_int4.cu) and ts_votes (ts_votes.cu) against
 * a double-precision reference on every head size, both key formats, group sizes 1..8, gqa=div|mod,
 * an odd sink count and candidate count (split and page boundaries off the 8-key groups), a shuffled
 * page table, the default plan and one of 64-candidate splits (and one split longer than the staged
 * page table): every logit written and within the hi/lo query split's error (~2^-17 of sum |q k|),
 * merged softmax statistics and votes within 1e-4 relative; a set hit flag leaves everything untouched.
 */
@Tag("gpu")
class TsScoreParityTest {

  static Gpu gpu;
  static SelectKernels sk;

  @BeforeAll
  static void open() {
    gpu = new Gpu();
    sk = new SelectKernels(gpu.k);
  }

  @AfterAll
  static void close() {
    gpu.close();
  }

  static final int PAGE = 64;

  /** One random layer: paged bf16 keys, the int4 copy, a fingerprint; and the kernels' outputs. */
  static final class Case {
    final int heads, nKv, d, slots, sinks, cands, group;
    final boolean int4, mod;
    final float voteScale = 0.37f;
    final float[] k;       // (slots, nKv, d) keys as the kernel sees them (bf16 values or int4 integers)
    final float[] kScale;  // (slots, nKv) int4 scales
    final float[] qf;      // (heads, d) f32
    final Kernels.KvView view;
    final DeviceBuffer kq, ks, qfDev;

    Case(int heads, int nKv, int d, boolean int4, boolean mod, long seed) {
      this(heads, nKv, d, int4, mod, seed, 1000);
    }

    Case(int heads, int nKv, int d, boolean int4, boolean mod, long seed, int slots) {
      this.heads = heads;
      this.nKv = nKv;
      this.d = d;
      this.int4 = int4;
      this.mod = mod;
      group = heads / nKv;
      this.slots = slots;
      sinks = 5;
      cands = slots - sinks - 7;
      Random r = new Random(seed);
      int pages = (slots + PAGE - 1) / PAGE + 2;
      int[] table = new int[pages];
      for (int i = 0; i < pages; i++) table[i] = i;
      for (int i = pages - 1; i > 0; i--) {
        int j = r.nextInt(i + 1), x = table[i];
        table[i] = table[j];
        table[j] = x;
      }
      float[] paged = Gpu.random(r, pages * nKv * PAGE * d, 1);
      k = new float[slots * nKv * d];
      kScale = new float[slots * nKv];
      int[] packed = new int[slots * nKv * d / 8];  // (slots, nKv, d / 2) bytes, 4 per int, little-endian
      for (int s = 0; s < slots; s++) {
        for (int g = 0; g < nKv; g++) {
          kScale[s * nKv + g] = 0.01f + r.nextFloat() * 0.1f;
          for (int j = 0; j < d; j++) {
            int at = (s * nKv + g) * d + j;
            if (int4) {
              int v = r.nextInt(15) - 7;
              k[at] = v;
              int b = at / 2;  // byte index; even element in the low nibble
              packed[b / 4] |= (v & 15) << (4 * (j & 1) + 8 * (b % 4));
            } else {
              k[at] = paged[((table[s / PAGE] * nKv + g) * PAGE + s % PAGE) * d + j];
            }
          }
        }
      }
      DeviceBuffer kPre = gpu.bf16(paged);
      view = new Kernels.KvView(kPre.ptr(), kPre.ptr(), kPre.ptr(), gpu.ints(table).ptr(), nKv, d, PAGE);
      kq = gpu.ints(packed);
      ks = gpu.f32(kScale);
      qf = new float[heads * d];
      for (int i = 0; i < qf.length; i++) qf[i] = (float) (r.nextGaussian() * 0.3);  // not bf16: the lo part matters
      qfDev = gpu.f32(qf);
    }

    int kvHeadOf(int h) {
      return mod ? h % nKv : h / group;
    }

    /** Reference logit and the bound of its rounding: voteScale * scale * sum |q k| * 1e-5. */
    double[] ref(int h, int c) {
      int g = kvHeadOf(h), s = sinks + c;
      double dot = 0, abs = 0;
      for (int j = 0; j < d; j++) {
        double x = (double) qf[h * d + j] * k[(s * nKv + g) * d + j];
        dot += x;
        abs += Math.abs(x);
      }
      double f = voteScale * (int4 ? kScale[s * nKv + g] : 1.0);
      return new double[] {f * dot, Math.abs(f) * abs * 1e-5 + 1e-7};
    }

    int[] hist;  // (lists, TOPK_WS) the top-k workspace ts_votes histogrammed into, from the last run

    /** Runs scoring with plan p and votes; returns logits, merged (M, L) per head, votes. */
    float[][] run(SelectKernels.ScorePlan p, boolean perKv, int hitFlag) {
      int lists = perKv ? nKv : 1;
      DeviceBuffer logits = gpu.poisoned((long) heads * cands * 4, false);
      DeviceBuffer partMl = gpu.poisoned((long) heads * p.splits() * 2 * 4, false);
      DeviceBuffer votes = gpu.poisoned((long) lists * cands * 4, false);
      DeviceBuffer hit = gpu.ints(new int[] {hitFlag});
      if (int4) {
        sk.scoreInt4(logits.ptr(), partMl.ptr(), hit.ptr(), kq.ptr(), ks.ptr(), qfDev.ptr(), heads, nKv, d, sinks,
            cands, p, mod, voteScale);
      } else {
        sk.score(logits.ptr(), partMl.ptr(), hit.ptr(), view, qfDev.ptr(), heads, sinks, cands, p, mod, voteScale);
      }
      DeviceBuffer ws = gpu.ints(new int[lists * SelectKernels.TOPK_WS]);
      sk.votes(votes.ptr(), ws.ptr(), logits.ptr(), partMl.ptr(), hit.ptr(), heads, nKv, cands, p.splits(), perKv, mod);
      gpu.stream.synchronize();
      hist = ws.downloadInts(lists * SelectKernels.TOPK_WS);
      return new float[][] {gpu.readF32(logits, heads * cands), gpu.readF32(partMl, heads * p.splits() * 2),
          gpu.readF32(votes, lists * cands)};
    }
  }

  @ParameterizedTest(name = "d={0} heads={1}/{2} int4={3} mod={4}")
  @CsvSource({"16, 4, 2, false, false", "16, 4, 2, true, true", "32, 6, 2, false, true", "32, 6, 2, true, false",
      "64, 8, 2, false, false", "64, 8, 1, true, false", "64, 8, 8, false, true", "128, 32, 8, false, false",
      "128, 32, 8, true, true", "128, 24, 8, false, true", "128, 16, 2, true, false", "256, 8, 2, false, false",
      "256, 8, 2, true, true"})
  void logitsStatisticsAndVotesMatchTheReference(int d, int heads, int nKv, boolean int4, boolean mod) {
    Case cs = new Case(heads, nKv, d, int4, mod, d * 1000L + heads * 10L + nKv + (int4 ? 7 : 0) + (mod ? 3 : 0));
    SelectKernels.ScorePlan small = new SelectKernels.ScorePlan(64, (cs.cands + 63) / 64);
    for (SelectKernels.ScorePlan p : new SelectKernels.ScorePlan[] {sk.plan(cs.cands, nKv), small}) {
      for (boolean perKv : new boolean[] {false, true}) {
        float[][] out = cs.run(p, perKv, 0);
        check(cs, p, perKv, out, "d=" + d + " int4=" + int4 + " mod=" + mod + " " + p + " perKv=" + perKv);
      }
    }
  }

  static void check(Case cs, SelectKernels.ScorePlan p, boolean perKv, float[][] out, String what) {
    int heads = cs.heads, cands = cs.cands;
    double[][] ref = new double[heads][cands];
    double[] mRef = new double[heads], lRef = new double[heads];
    double worst = 0;  // largest logit error bound: the statistics and votes inherit it
    for (int h = 0; h < heads; h++) {
      double m = Double.NEGATIVE_INFINITY;
      for (int c = 0; c < cands; c++) {
        double[] x = cs.ref(h, c);
        ref[h][c] = x[0];
        worst = Math.max(worst, x[1]);
        float got = out[0][h * cands + c];
        assertTrue(Math.abs(got - x[0]) <= x[1], what + ": logit h=" + h + " c=" + c + " " + got + " vs " + x[0]);
        m = Math.max(m, x[0]);
      }
      double l = 0;
      for (int c = 0; c < cands; c++) l += Math.exp(ref[h][c] - m);
      mRef[h] = m;
      lRef[h] = l;
      // the splits' partials merged
      double gm = Double.NEGATIVE_INFINITY, gl = 0;
      for (int s = 0; s < p.splits(); s++) gm = Math.max(gm, out[1][(h * p.splits() + s) * 2]);
      for (int s = 0; s < p.splits(); s++) {
        float ms = out[1][(h * p.splits() + s) * 2], ls = out[1][(h * p.splits() + s) * 2 + 1];
        assertTrue(!Float.isNaN(ms) && !Float.isNaN(ls), what + ": partial h=" + h + " split " + s + " unwritten");
        if (ms != Float.NEGATIVE_INFINITY) gl += ls * Math.exp(ms - gm);
      }
      assertEquals(m, gm, worst + 1e-6, what + ": max of head " + h);
      assertEquals(l, gl, (1e-4 + 2 * worst) * l, what + ": sum of head " + h);
    }
    int lists = perKv ? cs.nKv : 1;
    for (int g = 0; g < lists; g++) {
      for (int c = 0; c < cands; c++) {
        double v = 0;
        for (int h = 0; h < heads; h++) {
          // list g is voted by the heads that attend with KV head g (h / group), whichever key gqa=mod scored
          if (!perKv || h / cs.group == g) v += Math.exp(ref[h][c] - mRef[h]) / lRef[h];
        }
        assertEquals(v, out[2][g * cands + c], (1e-4 + 4 * worst) * v + 1e-9, what + ": vote list " + g + " c=" + c);
      }
      // the top-k's first histogram: the top 11 bits of each vote's sortable key, nothing else touched
      int[] want = new int[SelectKernels.TOPK_WS];
      for (int c = 0; c < cands; c++) want[(int) (SelectKernelsHostTest.key(out[2][g * cands + c]) >>> 21)]++;
      int[] got = Arrays.copyOfRange(cs.hist, g * SelectKernels.TOPK_WS, (g + 1) * SelectKernels.TOPK_WS);
      assertArrayEquals(want, got, what + ": histogram of list " + g);
    }
  }

  @Test
  void aSplitOfMoreThanTsPagesPagesReadsTheTableFromGlobalMemory() {
    Case cs = new Case(4, 1, 64, false, false, 11, 256 * PAGE + 300);  // one split over 261 pages
    SelectKernels.ScorePlan one = new SelectKernels.ScorePlan((cs.cands + 63) / 64 * 64, 1);
    check(cs, one, false, cs.run(one, false, 0), "one split of " + cs.cands);
  }

  @Test
  void aHitLeavesEveryOutputUntouched() {
    Case cs = new Case(32, 8, 128, false, false, 9);
    float[][] out = cs.run(sk.plan(cs.cands, 8), false, 1);
    for (float[] o : out) for (float x : o) assertTrue(Float.isNaN(x), "written despite the hit flag");
    for (int x : cs.hist) assertEquals(0, x, "histogram despite the hit flag");
  }
}
