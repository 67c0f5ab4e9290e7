package io.longsieve.engine;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cuda.CudaRunner;
import io.longsieve.cuda.kernels.TsaKernels;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PrefixReuse;
import org.junit.jupiter.api.Test;

/**
 * The sizes of the gpu-tagged {@link CudaPrefixReuseTest}, checked where CI runs (no GPU): under the
 * CUDA engine's prefix cuts (whole forward chunks of {@link CudaRunner#prefillChunk}), every row of
 * every policy that test runs may take a prefix of {@link CudaPrefixReuseTest#REUSED} tokens, its
 * prompt and new tokens fit the model, and the model's head size is one the GPU's TSA takes. (The
 * GPU's chunk went from 2048 to 4096 after that test was written for a 2100-token document on a
 * 4096-position model: no row could reuse anything, and the GPU's TSA refused its head size 16.)
 */
class CudaPrefixReuseSizesTest {

  static final PrefixReuse.Cuts GPU =
      new PrefixReuse.Cuts(CudaRunner.prefillChunk(EngineSpec.of(CudaPrefixReuseTest.MODEL)), false);

  @Test
  void everyRowOfTheGpuTestMayReuseAWholeChunk() {
    assertTrue(CudaPrefixReuseTest.REUSED >= CudaRunner.MIN_GPU_CHUNK);
    for (String policy : CudaPrefixReuseTest.POLICIES) {
      PolicySpec p = PolicySpec.parse(policy);
      for (int q = 0; q < 4; q++) {
        int prompt = CudaPrefixReuseTest.DOC + CudaPrefixReuseTest.QUESTION[q];
        assertEquals(CudaPrefixReuseTest.REUSED,
            PrefixReuse.reusableTokens(p, CudaPrefixReuseTest.DOC, prompt, GPU), policy + ", row " + q);
      }
    }
  }

  @Test
  void theGpuTestsModelHoldsItsRowsAndRunsTsaOnTheGpu() {
    ModelConfig c = ModelConfig.read(CudaPrefixReuseTest.MODEL);
    int longest = CudaPrefixReuseTest.DOC + java.util.Arrays.stream(CudaPrefixReuseTest.QUESTION).max().getAsInt();
    assertTrue(longest + CudaPrefixReuseTest.NEW_TOKENS <= c.maxPositions(), "positions: " + c.maxPositions());
    assertDoesNotThrow(() -> TsaKernels.checkD(c.headDim()));
  }

  @Test
  void aSharedPartShorterThanTheGpuChunkReusesNothingThere() {
    // the old test's sizes: dense and TokenSelect reuse nothing under a 4096-token chunk
    assertEquals(0, PrefixReuse.reusableTokens(PolicySpec.parse("dense"), 2100, 2109, GPU));
    assertEquals(0, PrefixReuse.reusableTokens(PolicySpec.parse("tokenselect"), 2100, 2109, GPU));
    assertEquals(2048, PrefixReuse.reusableTokens(PolicySpec.parse("tsa:chunk=512"), 2100, 2109, GPU));
  }
}
