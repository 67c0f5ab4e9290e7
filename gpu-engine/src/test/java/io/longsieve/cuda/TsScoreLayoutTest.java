package io.longsieve.cuda;

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
 * GPU): each lane quad t loads its chunks of a key (bf16 words, or int4 bytes decoded with the
 * kernel's bit tricks: spread, XOR 0x88888888, nibble pairs (p, p + 4) as 128 + u, minus 136), and
 * the query fragments are gathered at tss_dim. For every head size and both key formats: the mma's
 * k index of each B element holds the key dim that tss_dim gives the matching A element, tss_dim
 * covers every dim exactly once, and the mma-order dot product equals the plain one. Also the host
 * side of ts_score.cu: the vote grid and the constants SelectKernels shares with the kernels.
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
    int w = words[kk >> 1] ^ 0x88888888;
    for (int half = 0; half < 2; half++) {  // b0: p = 2h, b1: p = 2h + 1
      int p = 2 * (kk & 1) + half;
      int x = (w >>> (4 * p)) & 0x000F000F;
      e[2 * half] = (x & 0xF) + 128 - 136;           // 0x4300 | u = 128 + u in bf16, minus 136
      e[2 * half + 1] = ((x >>> 16) & 0xF) + 128 - 136;
    }
    return e;
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
  void hostConstantsMatchTsScoreCu() throws IOException {
    String cu = Files.readString(Path.of("src/main/cuda/ts_score.cu"));
    assertTrue(cu.contains("#define TSS_WARPS " + SelectKernels.SCORE_THREADS / 32 + " "), "TSS_WARPS vs SCORE_THREADS");
    assertTrue(cu.contains("#define TSS_GMAX " + SelectKernels.MAX_GROUP + " "), "TSS_GMAX vs MAX_GROUP");
    assertEquals(0, SelectKernels.VOTE_THREADS % 32, "ts_votes: whole warps of 8-lane head groups");
  }
}
