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

/** Greedy and top-p token picks on the device against Sampler.argmax and CpuOps.topPIndexOrder. */
@Tag("gpu")
class SamplingParityTest extends GpuTest {

  @ParameterizedTest
  @ValueSource(ints = {7, 1024, 32000, 128256})
  void argmaxMatchesHostWithLowestIdOnTies(int vocab) {
    Random r = new Random(vocab);
    for (int trial = 0; trial < 5; trial++) {
      float[] logits = Gpu.random(r, vocab, 4);
      if (trial == 1) logits[vocab - 1] = logits[vocab / 2] = 100f;  // a tie: the lower id wins
      DeviceBuffer token = gpu.poisoned(4, false);
      gpu.k.argmax(token.ptr(), gpu.f32(logits).ptr(), vocab);
      gpu.stream.synchronize();
      assertEquals(Sampler.argmax(logits, vocab), token.downloadInts(1)[0], "vocab " + vocab + " trial " + trial);
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {50, 1024, 128256})
  void topPPicksTheSameIdAsTheCpuTwin(int vocab) {
    Random r = new Random(vocab + 5);
    double[][] settings = {{1.0, 0.9}, {0.7, 0.5}, {1.3, 1.0}, {0.2, 0.95}};
    for (double[] s : settings) {
      float[] logits = Gpu.random(r, vocab, 3);
      DeviceBuffer lg = gpu.f32(logits), probs = gpu.alloc(vocab * 4L);
      boolean[] nucleus = CpuOps.topPNucleus(logits, vocab, s[0], s[1]);
      for (int draw = 0; draw < 8; draw++) {
        double u = r.nextDouble();
        DeviceBuffer token = gpu.poisoned(4, false);
        gpu.k.sampleTopP(token.ptr(), probs.ptr(), lg.ptr(), vocab, (float) s[0], (float) s[1], (float) u);
        gpu.stream.synchronize();
        int got = token.downloadInts(1)[0];
        assertTrue(got >= 0 && got < vocab && nucleus[got], "token " + got + " outside the nucleus");
        int want = CpuOps.topPIndexOrder(logits, vocab, s[0], s[1], u);
        // f32 on the device vs f64 here: a draw within rounding of a boundary may land one kept id over
        if (got != want) {
          int lo = Math.min(got, want), hi = Math.max(got, want), keptBetween = 0;
          for (int i = lo + 1; i < hi; i++) if (nucleus[i]) keptBetween++;
          assertEquals(0, keptBetween, "device picked " + got + ", cpu " + want + " (u " + u + ")");
        }
      }
    }
  }
}
