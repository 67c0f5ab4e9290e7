package io.longsieve.cuda.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.GpuTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.engine.spi.Sampler;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Picks under a JSON-schema token mask on the device (argmax_masked_f32, sample_top_p_masked) against
 * the CPU twin: Sampler.mask (disallowed logits to -infinity), then Sampler.argmax / CpuOps.topPIndexOrder.
 * Masks from one allowed token to half the vocabulary, the allowed tokens placed anywhere.
 */
@Tag("gpu")
class MaskedSamplingParityTest extends GpuTest {

  /** A random mask with about {@code share} of the tokens allowed, at least one. */
  static long[] mask(Random r, int vocab, double share) {
    long[] m = new long[(vocab + 63) / 64];
    for (int i = 0; i < vocab; i++) if (r.nextDouble() < share) m[i >>> 6] |= 1L << i;
    int one = r.nextInt(vocab);
    m[one >>> 6] |= 1L << one;
    return m;
  }

  /** The mask as the device reads it: u32 words, little-endian halves of the longs. */
  static int[] words(long[] m, int vocab) {
    int[] w = new int[Kernels.maskWords(vocab)];
    for (int i = 0; i < m.length; i++) {
      w[2 * i] = (int) m[i];
      w[2 * i + 1] = (int) (m[i] >>> 32);
    }
    return w;
  }

  static boolean allowed(long[] m, int id) {
    return (m[id >>> 6] >>> id & 1) != 0;
  }

  @ParameterizedTest
  @ValueSource(ints = {7, 1024, 32000, 128256})
  void maskedArgmaxMatchesTheHost(int vocab) {
    Random r = new Random(vocab);
    for (double share : new double[] {0, 0.001, 0.1, 0.5}) {
      float[] logits = Gpu.random(r, vocab, 4);
      long[] m = mask(r, vocab, share);
      DeviceBuffer token = gpu.poisoned(4, false);
      gpu.k.argmaxMasked(token.ptr(), gpu.f32(logits).ptr(), vocab, gpu.ints(words(m, vocab)).ptr());
      gpu.stream.synchronize();
      float[] masked = logits.clone();
      Sampler.mask(masked, vocab, m);
      int got = token.downloadInts(1)[0];
      assertTrue(allowed(m, got), "picked a masked token " + got);
      assertEquals(Sampler.argmax(masked, vocab), got, "vocab " + vocab + " share " + share);
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {50, 1024, 128256})
  void maskedTopPPicksAnAllowedTokenOfTheMaskedNucleus(int vocab) {
    Random r = new Random(vocab + 9);
    double[][] settings = {{1.0, 1.0}, {1.0, 0.9}, {0.7, 0.5}, {1.3, 1.0}};
    for (double[] s : settings) {
      for (double share : new double[] {0, 0.01, 0.3}) {
        float[] logits = Gpu.random(r, vocab, 3);
        long[] m = mask(r, vocab, share);
        float[] masked = logits.clone();
        Sampler.mask(masked, vocab, m);
        boolean[] nucleus = CpuOps.topPNucleus(masked, vocab, s[0], s[1]);
        DeviceBuffer lg = gpu.f32(logits), probs = gpu.alloc(vocab * 4L), mk = gpu.ints(words(m, vocab));
        for (int draw = 0; draw < 8; draw++) {
          double u = draw == 7 ? Math.nextDown(1.0) : r.nextDouble(); // the last draw at the top end: the fallback path
          DeviceBuffer token = gpu.poisoned(4, false);
          gpu.k.sampleTopPMasked(token.ptr(), probs.ptr(), lg.ptr(), vocab, (float) s[0], (float) s[1], (float) u, mk.ptr());
          gpu.stream.synchronize();
          int got = token.downloadInts(1)[0];
          assertTrue(got >= 0 && got < vocab && allowed(m, got), "token " + got + " is masked");
          assertTrue(nucleus[got], "token " + got + " outside the masked nucleus");
          int want = CpuOps.topPIndexOrder(masked, vocab, s[0], s[1], u);
          if (got != want && allowed(m, want)) { // f32 here vs f64 there: a draw at a boundary may land one kept id over
            int lo = Math.min(got, want), hi = Math.max(got, want), keptBetween = 0;
            for (int i = lo + 1; i < hi; i++) if (nucleus[i] && allowed(m, i)) keptBetween++;
            assertEquals(0, keptBetween, "device picked " + got + ", cpu " + want + " (u " + u + ")");
          }
        }
      }
    }
  }
}
