package io.longsieve.engine.spi;

/**
 * The KV size bookkeeping every backend's sequence does the same way: the cache's size right before
 * and right after the policy's compression at the end of the prefill, for the stats' KV columns.
 * Kept here so the CPU and CUDA backends, which may not import each other, share one copy.
 */
public abstract class KvSizedSequence implements ModelRunner.Sequence {
  private long kvBefore;
  private long kvAfter;

  /** Runs the policy's end-of-prefill {@code compression}, measuring {@link #kvBytes} on either side of it. */
  protected final void compressMeasured(Runnable compression) {
    kvBefore = kvBytes();
    compression.run();
    kvAfter = kvBytes();
  }

  @Override
  public final long kvBytesBeforeCompression() {
    return kvBefore;
  }

  @Override
  public final long kvBytesAfterCompression() {
    return kvAfter;
  }
}
