package io.longsieve.cuda.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The register layout of ts_score.cu's tensor-core scoring, line by line in Java (runs without a
 * GPU): each lane quad t loads its chunks of a key (bf16 words, or int4 bytes decoded with
 * ts_score_int4.cu's bit tricks: spread, nibble pairs (p, p + 4) masked and XOR 0x43084308 =
 * 128 + (q + 8) in bf16, minus 136), and the query fragments are gathered at tss_dim. For every head
 * size and both key formats: the mma's k index of each key element holds the key dim that tss_dim
 * gives the matching query element, tss_dim covers every dim exactly once, and the mma-order dot
 * product equals the plain one. The int4 kernel swaps the mma's roles (A = 16 keys, B = the heads'
 * hi/lo columns): a whole m16n8k16 in Java with PTX's fragment layout checks that lane (r, t) gets
 * head t's hi and lo parts of keys r and r + 8. Also the host side of ts_score.cu: the vote grid and
 * the constants SelectKernels shares with the kernels.
 */
class TsScoreLayoutTest {

  /** TssLayout<D, INT4>::W, CHUNKS, CB, WPC, WORDS. */
  record Lay(int d, boolean int4) {
    int w() {
      return int4 ? Math.min(d / 4, 32) : Math.min(d / 4, 8);
    }

    int chunks() {
      return d / (4 * w());
    }

    int cb() {
      return int4 ? w() / 2 : w() * 2;
    }

    int wpc() {
      return cb() >= 4 ? cb() / 4 : 1;
    }

    int words() {
      return chunks() * wpc();
    }
  }

  /** tss_dim. */
  static int dim(Lay lay, int kk, int s, int t) {
    int w = lay.w();
    if (!lay.int4()) {
      int e = 4 * kk + s;
      return (e / w) * 4 * w + t * w + e % w;
    }
    int h = kk & 1, wi = kk >> 1;
    int pos = 2 * h + (s & 1) * 4 + (s >> 1);
    if (w == 4) return t * 4 + (pos < 4 ? pos : pos - 2);
    int wpc = w >= 8 ? w / 8 : 1;
    return (wi / wpc) * 4 * w + t * w + (wi % wpc) * 8 + pos;
  }

  /** The lane's key words as the kernel loads them (bytes little-endian, tss_load). */
  static int[] load(Lay lay, byte[] row, int t) {
    int[] out = new int[lay.words()];
    for (int i = 0; i < lay.chunks(); i++) {
      int w = lay.w();
      int off = lay.int4() ? (i * 4 * w + t * w) / 2 : (i * 4 * w + t * w) * 2;
      if (lay.cb() == 2) {
        int x = (row[off] & 0xFF) | (row[off + 1] & 0xFF) << 8;
        out[i * lay.wpc()] = (x & 0xFF) | ((x & 0xFF00) << 8);
      } else {
        for (int j = 0; j < lay.cb() / 4; j++) {
          int b = off + 4 * j;
          out[i * lay.wpc() + j] = (row[b] & 0xFF) | (row[b + 1] & 0xFF) << 8 | (row[b + 2] & 0xFF) << 16
              | (row[b + 3] & 0xFF) << 24;
        }
      }
    }
    return out;
  }

  /** The four B elements (b0 low, b0 high, b1 low, b1 high) of k-step kk as values. */
  static float[] bElems(Lay lay, int[] words, int kk) {
    float[] e = new float[4];
    if (!lay.int4()) {
      // bf16: b0 = word 2kk, b1 = word 2kk + 1, the low half the first element
      for (int s = 0; s < 4; s++) {
        int bits = (words[2 * kk + (s >> 1)] >>> (16 * (s & 1))) & 0xFFFF;
        e[s] = Float.intBitsToFloat(bits << 16);
      }
      return e;
    }
    int w = words[kk >> 1];
    for (int half = 0; half < 2; half++) {  // elements 0, 1: pair p = 2h; 2, 3: pair p = 2h + 1
      int x = pair(w, 2 * (kk & 1) + half);
      e[2 * half] = Float.intBitsToFloat((x & 0xFFFF) << 16);
      e[2 * half + 1] = Float.intBitsToFloat((x >>> 16) << 16);
    }
    return e;
  }

  /** tsi_pair: nibbles p (low half) and p + 4 of the raw word as bf16x2 of the signed values. */
  static int pair(int w, int p) {
    int x = ((w >>> (4 * p)) & 0x000F000F) ^ 0x43084308;
    int out = 0;
    for (int half = 0; half < 2; half++) {  // bf16 minus 136 (exact: a small integer)
      float v = Float.intBitsToFloat(((x >>> (16 * half)) & 0xFFFF) << 16) - 136f;
      out |= (Float.floatToRawIntBits(v) >>> 16) << (16 * half);
    }
    return out;
  }

  @ParameterizedTest(name = "d={0} int4={1}")
  @CsvSource({"16, false", "32, false", "64, false", "128, false", "256, false", "16, true", "32, true", "64, true",
      "128, true", "256, true"})
  void fragmentsPairEveryDimOnceAndTheDotIsExact(int d, boolean int4) {
    Lay lay = new Lay(d, int4);
    assertEquals(int4 ? Math.max(1, d / 32) : d / 8, lay.words(), "words per lane: every k-step fed");
    Random r = new Random(d * 7L + (int4 ? 1 : 0));
    for (int trial = 0; trial < 20; trial++) {
      float[] k = new float[d];
      byte[] row = new byte[int4 ? d / 2 : 2 * d];
      for (int j = 0; j < d; j++) {
        if (int4) {
          int v = r.nextInt(16) - 8;
          k[j] = v;
          row[j / 2] |= (byte) ((v & 15) << (4 * (j & 1)));  // even element in the low nibble
        } else {
          int bits = Float.floatToRawIntBits((float) r.nextGaussian()) >>> 16;  // a bf16 value
          k[j] = Float.intBitsToFloat(bits << 16);
          row[2 * j] = (byte) bits;
          row[2 * j + 1] = (byte) (bits >>> 8);
        }
      }
      float[] q = new float[d];
      for (int j = 0; j < d; j++) q[j] = (float) r.nextGaussian();
      boolean[] seen = new boolean[d];
      double viaMma = 0;
      for (int t = 0; t < 4; t++) {
        int[] words = load(lay, row, t);
        for (int kk = 0; kk < d / 16; kk++) {
          float[] b = bElems(lay, words, kk);
          for (int s = 0; s < 4; s++) {
            int dd = dim(lay, kk, s, t);
            assertTrue(dd >= 0 && dd < d, "dim in range");
            if (trial == 0) {
              assertTrue(!seen[dd], "dim " + dd + " twice (kk " + kk + " s " + s + " t " + t + ")");
              seen[dd] = true;
            }
            assertEquals(k[dd], b[s], 0f, "B element kk=" + kk + " s=" + s + " t=" + t + " is dim " + dd);
            viaMma += (double) q[dd] * b[s];
          }
        }
      }
      if (trial == 0) for (int j = 0; j < d; j++) assertTrue(seen[j], "dim " + j + " never scored");
      double plain = 0;
      for (int j = 0; j < d; j++) plain += (double) q[j] * k[j];
      assertEquals(plain, viaMma, 1e-9 * (1 + Math.abs(plain)));
    }
  }

  /** bf16 round-to-nearest-even of x, as a float (__float2bfloat16_rn). */
  static float bf16(float x) {
    int b = Float.floatToRawIntBits(x);
    return Float.intBitsToFloat(((b + 0x7FFF + ((b >>> 16) & 1)) >>> 16) << 16);
  }

  /** Half e (0 low) of a bf16x2 register as a float. */
  static float half(int reg, int e) {
    return Float.intBitsToFloat(((reg >>> (16 * e)) & 0xFFFF) << 16);
  }

  /**
   * ts_score_int4.cu's tsi_body for one group of 16 keys: lane (r, t) holds a[i] = tsi_pair of key
   * r + 8 (i & 1), word kk / 2, pair 2 (kk & 1) + (i >> 1), and b = the hi (r even) or lo (r odd)
   * part of head nb * 4 + r / 2 at tss_dim; placed by PTX's m16n8k16 fragment layout (A: row gid +
   * 8 (i & 1), k 2t + e + 8 (i >> 1); B: k 2t + e + 8i, column gid; C: row gid + 8 (i >> 1), column
   * 2t + (i & 1)), c0 + c1 and c2 + c3 of lane (r, t) must be head nb * 4 + t's dot with keys r and
   * r + 8.
   */
  @ParameterizedTest(name = "d={0} group={1}")
  @CsvSource({"16, 4", "32, 1", "64, 3", "128, 4", "128, 8", "128, 6", "256, 5", "256, 2"})
  void int4MmaGivesEachLaneItsHeadsHiAndLoParts(int d, int group) {
    Lay lay = new Lay(d, true);
    Random rnd = new Random(d * 31L + group);
    int nbs = group <= 4 ? 1 : 2;
    float[][] k = new float[16][d];
    byte[][] rows = new byte[16][d / 2];
    for (int key = 0; key < 16; key++) {
      for (int j = 0; j < d; j++) {
        int v = rnd.nextInt(16) - 8;
        k[key][j] = v;
        rows[key][j / 2] |= (byte) ((v & 15) << (4 * (j & 1)));
      }
    }
    float[][] q = new float[group][d];
    for (float[] h : q) for (int j = 0; j < d; j++) h[j] = (float) rnd.nextGaussian();
    double[][][] c = new double[nbs][32][4];  // (column block, lane, C register)
    for (int kk = 0; kk < d / 16; kk++) {
      float[][] a = new float[16][16];
      for (int lane = 0; lane < 32; lane++) {
        int gid = lane >> 2, t = lane & 3, wi = kk >> 1, p = 2 * (kk & 1);
        int[] w0 = load(lay, rows[gid], t), w1 = load(lay, rows[gid + 8], t);
        int[] regs = {pair(w0[wi], p), pair(w1[wi], p), pair(w0[wi], p + 1), pair(w1[wi], p + 1)};
        for (int i = 0; i < 4; i++) {
          for (int e = 0; e < 2; e++) a[gid + 8 * (i & 1)][2 * t + e + 8 * (i >> 1)] = half(regs[i], e);
        }
      }
      for (int nb = 0; nb < nbs; nb++) {
        float[][] b = new float[16][8];
        for (int lane = 0; lane < 32; lane++) {
          int gid = lane >> 2, t = lane & 3, j = nb * 4 + gid / 2;
          for (int i = 0; i < 2; i++) {
            for (int e = 0; e < 2; e++) {
              float x = j < group ? q[j][dim(lay, kk, 2 * i + e, t)] : 0f, h = bf16(x);
              b[2 * t + e + 8 * i][gid] = (gid & 1) == 0 ? h : bf16(x - h);
            }
          }
        }
        for (int lane = 0; lane < 32; lane++) {
          int gid = lane >> 2, t = lane & 3;
          for (int i = 0; i < 4; i++) {
            int row = gid + 8 * (i >> 1), col = 2 * t + (i & 1);
            for (int kx = 0; kx < 16; kx++) c[nb][lane][i] += (double) a[row][kx] * b[kx][col];
          }
        }
      }
    }
    int checked = 0;
    for (int nb = 0; nb < nbs; nb++) {
      for (int lane = 0; lane < 32; lane++) {
        int gid = lane >> 2, t = lane & 3, j = nb * 4 + t;
        if (j >= group) continue;
        for (int rr = 0; rr < 2; rr++) {
          int key = gid + 8 * rr;
          double plain = 0, mag = 0;
          for (int dd = 0; dd < d; dd++) {
            plain += (double) k[key][dd] * q[j][dd];
            mag += Math.abs((double) k[key][dd] * q[j][dd]);
          }
          double got = c[nb][lane][2 * rr] + c[nb][lane][2 * rr + 1];
          assertEquals(plain, got, 1e-4 * (1 + mag), "head " + j + " key " + key + " lane " + lane);
          checked++;
        }
      }
    }
    assertEquals(16 * group, checked, "every (head, key) of the group scored by exactly one lane register pair");
  }

  @ParameterizedTest(name = "cands={0}")
  @CsvSource({"1", "255", "256", "257", "130000", "10000000"})
  void voteBlocksCoverEveryCandidate(int cands) {
    int sms = 132, b = SelectKernels.voteBlocks(cands, sms), t = SelectKernels.VOTE_THREADS;
    assertTrue(b >= 1 && b <= 4 * sms, "blocks " + b);
    if (cands <= 4 * sms * t) {  // one candidate per thread until the grid is full, grid-stride beyond
      assertTrue((long) b * t >= cands && (long) (b - 1) * t < cands, "blocks " + b);
    } else {
      assertEquals(4 * sms, b);
    }
  }

  @Test
  void hostConstantsMatchTsScoreCuh() throws IOException {
    String cu = Files.readString(Path.of("src/main/cuda/select/ts_score.cuh"));
    assertTrue(cu.contains("#define TSS_WARPS " + SelectKernels.SCORE_THREADS / 32 + " "), "TSS_WARPS vs SCORE_THREADS");
    assertTrue(cu.contains("#define TSS_GMAX " + SelectKernels.MAX_GROUP + " "), "TSS_GMAX vs MAX_GROUP");
    assertEquals(0, SelectKernels.VOTE_THREADS % 32, "ts_votes: whole warps of 8-lane head groups");
  }
}
