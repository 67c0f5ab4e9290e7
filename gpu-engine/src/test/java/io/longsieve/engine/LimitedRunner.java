package io.longsieve.engine;

import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.policy.PolicySpec;

/**
 * A runner that holds at most {@code limit} sequences open and fails a further open with the
 * message of the CUDA driver's out-of-memory error, as a GPU whose memory is full does. Decode
 * steps take the default one-after-the-other path (the CUDA backend's, see {@link DelegatingRunner}).
 */
final class LimitedRunner extends DelegatingRunner {

  private final int limit;
  private int open; // the scheduler thread only

  LimitedRunner(ModelRunner inner, int limit) {
    super(inner);
    this.limit = limit;
  }

  @Override
  public Sequence open(int capacity, PolicySpec policy) {
    if (open == limit) throw new IllegalStateException("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (test runner)");
    Sequence s = inner.open(capacity, policy);
    open++;
    return new DelegatingSequence(s) {
      boolean closed;

      @Override
      public void close() {
        if (!closed) { // a sequence may be closed more than once; it frees its slot once
          closed = true;
          open--;
          super.close();
        }
      }
    };
  }
}
