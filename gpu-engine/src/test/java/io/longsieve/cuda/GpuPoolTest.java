package io.longsieve.cuda;

import io.longsieve.cpu.kernels.ThreadPool;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** A {@link GpuTest} whose CPU side also needs a ThreadPool (its twins, CpuOps): opened after the GPU. */
public abstract class GpuPoolTest extends GpuTest {

  public static ThreadPool pool;

  @BeforeAll
  static void openPool() {
    pool = new ThreadPool(0);
  }

  @AfterAll
  static void closePool() {
    pool.close();
  }
}
