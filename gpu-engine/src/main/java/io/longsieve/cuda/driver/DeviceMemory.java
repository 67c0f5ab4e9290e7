package io.longsieve.cuda.driver;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The device memory this process's engines hold through {@link CudaContext#alloc} (weights, KV cache,
 * workspaces), summed over contexts, for the metrics. A class of its own, with no JCuda type in it,
 * so reading it on a machine without the CUDA driver loads nothing native: it stays 0 there.
 */
public final class DeviceMemory {
  private DeviceMemory() {}

  private static final AtomicLong USED = new AtomicLong();

  /** Bytes allocated and not yet released, over every CUDA context of the process. */
  public static long usedBytes() {
    return USED.get();
  }

  static void add(long bytes) {
    USED.addAndGet(bytes);
  }
}
