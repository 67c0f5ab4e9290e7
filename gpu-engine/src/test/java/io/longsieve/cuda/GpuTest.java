package io.longsieve.cuda;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * Base of the GPU parity test classes: one {@link Gpu} (context, module, stream, kernels) opened
 * before a class's tests and closed after them. Surefire runs test classes one after another, so
 * the one static field serves each class in turn. Subclasses are tagged "gpu".
 */
public abstract class GpuTest {

  public static Gpu gpu;

  @BeforeAll
  static void openGpu() {
    gpu = new Gpu();
  }

  @AfterAll
  static void closeGpu() {
    gpu.close();
  }
}
