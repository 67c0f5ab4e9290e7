package io.longsieve.cuda.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/**
 * The decode GEMV an engine runs follows its batch limit alone (no GPU needed): one sequence a step gets
 * the CUDA-core kernel, anything that batches the tensor-core one, and the bench's override is checked.
 * The warp count of the tensor-core kernel depends on the column count only, never on the rows.
 */
class GemvChoiceTest {

  @Test
  void batchLimitPicksTheKernel() {
    assertEquals(Gemv.CUDA_CORES, Gemv.forBatch(1));
    assertEquals(Gemv.TENSOR_CORES, Gemv.forBatch(2));
    assertEquals(Gemv.TENSOR_CORES, Gemv.forBatch(64));
  }

  @Test
  void propertyOverridesTheChoice() {
    String before = System.getProperty("longsieve.gemv");
    try {
      System.setProperty("longsieve.gemv", "mma");
      assertEquals(Gemv.TENSOR_CORES, Gemv.forBatch(1));
      System.setProperty("longsieve.gemv", "simt");
      assertEquals(Gemv.CUDA_CORES, Gemv.forBatch(8));
      System.setProperty("longsieve.gemv", "fast");
      assertThrows(IllegalArgumentException.class, () -> Gemv.forBatch(8));
    } finally {
      if (before == null) System.clearProperty("longsieve.gemv");
      else System.setProperty("longsieve.gemv", before);
    }
  }

  @Test
  void warpsFollowTheColumnCount() {
    assertEquals(16, Kernels.gemvWarps(4096));    // o, down of the 8B shapes: 256 column tiles
    assertEquals(16, Kernels.gemvWarps(6144));    // q/k/v
    assertEquals(8, Kernels.gemvWarps(28672));    // gate/up
    assertEquals(8, Kernels.gemvWarps(128256));   // LM head
    assertEquals(16, Kernels.gemvWarps(17));
  }
}
