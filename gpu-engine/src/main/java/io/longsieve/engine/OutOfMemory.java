package io.longsieve.engine;

import java.util.Locale;

/**
 * The one rule for "this failure means out of memory", shared by the engine's admission (a request
 * that runs out while others hold memory waits for them instead of failing) and the job's retry
 * (smaller prefill chunks, then an {@code oom} row), so the two never disagree.
 */
public final class OutOfMemory {

  private OutOfMemory() {}

  /**
   * True when {@code t} or one of its causes is a {@link OutOfMemoryError}, an exception whose class
   * name says OutOfMemory, or a message naming CUDA_ERROR_OUT_OF_MEMORY, "out of memory" or
   * "memory budget exceeded" (the CUDA backend's own budget check).
   */
  public static boolean causedBy(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      String msg = c.getMessage() == null ? "" : c.getMessage().toUpperCase(Locale.ROOT);
      if (c instanceof OutOfMemoryError || c.getClass().getSimpleName().contains("OutOfMemory")
          || msg.contains("CUDA_ERROR_OUT_OF_MEMORY") || msg.contains("OUT OF MEMORY")
          || msg.contains("MEMORY BUDGET EXCEEDED")) {
        return true;
      }
    }
    return false;
  }
}
