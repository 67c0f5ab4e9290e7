package io.longsieve.engine;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class OutOfMemoryTest {

  @Test
  void theCudaBackendsBudgetCheckCountsAsOutOfMemory() {
    // CudaContext.alloc's message when an allocation would pass the engine's share of the GPU: before
    // this rule was shared, the engine failed such a request instead of letting it wait for memory
    IllegalStateException budget = new IllegalStateException("GPU memory budget exceeded allocating kv cache "
        + "(4096.0 MiB): 20000.0 of 22000.0 MiB in use on GPU 0; raise memoryFraction or shorten the context");
    assertTrue(OutOfMemory.causedBy(new RuntimeException("prefill failed", budget)));
  }

  @Test
  void javaAndCudaOutOfMemoryErrorsCount() {
    assertTrue(OutOfMemory.causedBy(new OutOfMemoryError("Java heap space")));
    assertTrue(OutOfMemory.causedBy(new IllegalStateException("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY")));
    assertTrue(OutOfMemory.causedBy(new RuntimeException("wrapped", new IllegalStateException("Out of memory"))));
  }

  @Test
  void otherFailuresDoNot() {
    assertFalse(OutOfMemory.causedBy(new IllegalStateException("CUDA_ERROR_ILLEGAL_ADDRESS")));
    assertFalse(OutOfMemory.causedBy(new IllegalArgumentException("prompt is longer than the context")));
    assertFalse(OutOfMemory.causedBy(null));
  }
}
