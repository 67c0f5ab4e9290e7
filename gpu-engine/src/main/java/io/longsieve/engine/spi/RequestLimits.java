package io.longsieve.engine.spi;

import java.util.function.Supplier;

/**
 * Per-request limits set by the caller around {@link Engine#generate}, without widening the request
 * record: a deadline and a smaller prefill chunk. The Spark job uses them for its per-document time
 * limit and for the retry after running out of memory (smaller chunks need smaller activations).
 *
 * <p>They live in a thread-local for the duration of {@link #with}: backends that run a request on
 * the caller's thread read them directly ({@link #checkDeadline()} once per forward chunk,
 * {@link #prefillChunk(int)} when cutting the prompt). A backend that hands requests to its own
 * scheduler thread must capture {@link #current()} at submission and honour it there.
 */
public final class RequestLimits {

  /** No deadline, the engine's own chunk size. */
  public static final RequestLimits NONE = new RequestLimits(Long.MAX_VALUE, 0);

  private static final ThreadLocal<RequestLimits> CURRENT = ThreadLocal.withInitial(() -> NONE);

  private final long deadlineNanos; // System.nanoTime() after which the request fails; MAX_VALUE: none
  private final int prefillChunk;   // tokens per prefill chunk; 0: the engine's own

  private RequestLimits(long deadlineNanos, int prefillChunk) {
    this.deadlineNanos = deadlineNanos;
    this.prefillChunk = prefillChunk;
  }

  /** Limits with a time budget from now ({@code timeoutNanos <= 0}: none) and a chunk size (0: engine's). */
  public static RequestLimits of(long timeoutNanos, int prefillChunk) {
    long deadline = timeoutNanos <= 0 ? Long.MAX_VALUE : System.nanoTime() + timeoutNanos;
    return new RequestLimits(deadline, Math.max(0, prefillChunk));
  }

  /** Runs {@code body} on this thread with these limits in force. */
  public <T> T with(Supplier<T> body) {
    RequestLimits previous = CURRENT.get();
    CURRENT.set(this);
    try {
      return body.get();
    } finally {
      CURRENT.set(previous);
    }
  }

  /** The limits in force on this thread. */
  public static RequestLimits current() {
    return CURRENT.get();
  }

  /** The chunk to use: the request's when it asked for a smaller one, else {@code engineChunk}. */
  public static int prefillChunk(int engineChunk) {
    int c = CURRENT.get().prefillChunk;
    return c > 0 && c < engineChunk ? c : engineChunk;
  }

  /** @throws GenerationTimeoutException when this thread's request is past its deadline */
  public static void checkDeadline() {
    CURRENT.get().check();
  }

  /** @throws GenerationTimeoutException when these limits' deadline has passed */
  public void check() {
    if (deadlineNanos != Long.MAX_VALUE && System.nanoTime() - deadlineNanos > 0) {
      throw new GenerationTimeoutException("the request ran past its time limit");
    }
  }
}
