package io.longsieve.model;

import java.util.AbstractList;
import java.util.List;

/**
 * The bookkeeping of one chat-template render on one thread: the work done so far against
 * {@link TemplateLimits}, the deadline, and why the render was stopped. Jinjava calls back into
 * static code (functions, the node pre-processor) with no handle on our state, so the run in
 * progress sits in a thread-local for the length of {@link ChatTemplate#render}.
 *
 * <p>Jinjava catches most exceptions and turns them into template errors, sometimes carrying on
 * after them; so the reason is recorded here first, and every later step throws again at once. The
 * caller reads {@link #overLimit()} and {@link #raised()} after the render, whatever Jinjava did.
 */
final class TemplateRun {

  private static final ThreadLocal<TemplateRun> CURRENT = new ThreadLocal<>();

  private final TemplateLimits limits;
  private final long deadline;   // System.nanoTime() after which the render is refused
  private long work;
  private String overLimit;      // why a bound stopped the render; null while within bounds
  private String raised;         // the template's own raise_exception message

  private TemplateRun(TemplateLimits limits) {
    this.limits = limits;
    this.deadline = System.nanoTime() + limits.timeLimit().toNanos();
  }

  /** Starts a run on this thread; the caller ends it with {@link #end()} in a finally block. */
  static TemplateRun begin(TemplateLimits limits) {
    TemplateRun run = new TemplateRun(limits);
    CURRENT.set(run);
    return run;
  }

  void end() {
    CURRENT.remove();
  }

  /** Which bound the render went past, e.g. "more than 1000000 template steps"; null if none. */
  String overLimit() {
    return overLimit;
  }

  /** The message of the template's {@code raise_exception}, or null. */
  String raised() {
    return raised;
  }

  /** Thrown to unwind Jinjava once a bound is passed; the reason is in the run, not only here. */
  static final class LimitExceeded extends RuntimeException {
    LimitExceeded(String reason) {
      super(reason, null, false, false);
    }
  }

  /** One template step: a node about to render, or a value taken from a range. */
  static void step() {
    TemplateRun run = CURRENT.get();
    if (run != null) run.count(1);
  }

  private void count(long steps) {
    if (overLimit != null) throw new LimitExceeded(overLimit);
    work += steps;
    if (work > limits.maxWork()) refuse("more than " + limits.maxWork() + " template steps (loops too large)");
    // nanoTime costs tens of nanoseconds; every 64th step keeps the check well under the work itself
    if ((work & 63) == 0 && System.nanoTime() > deadline) {
      refuse("more than " + limits.timeLimit().toMillis() + " ms");
    }
  }

  private void refuse(String reason) {
    overLimit = reason;
    throw new LimitExceeded(reason);
  }

  /** Called by templates that reject a conversation (e.g. roles out of order). */
  public static String raiseException(String message) {
    TemplateRun run = CURRENT.get();
    if (run != null && run.raised == null) run.raised = String.valueOf(message);
    throw new IllegalArgumentException("chat template: " + message);
  }

  /**
   * Python's {@code range(stop)}, {@code range(start, stop)}, {@code range(start, stop, step)},
   * replacing Jinjava's, which stops silently at its limit: a range longer than
   * {@link TemplateLimits#maxRange()} stops the render instead. The list is lazy, and each value
   * taken is a step, so nested loops are bounded by {@link TemplateLimits#maxWork()} as well.
   */
  public static List<Long> range(Object first, Object... more) {
    long start = 0, stop, stride = 1;
    if (more.length == 0) {
      stop = integer(first);
    } else {
      start = integer(first);
      stop = integer(more[0]);
      if (more.length > 2) throw new IllegalArgumentException("range() takes at most 3 arguments");
      if (more.length > 1) stride = integer(more[1]);
    }
    if (stride == 0) throw new IllegalArgumentException("range() step must not be zero");
    long count = stride > 0 ? ceilDiv(stop - start, stride) : ceilDiv(start - stop, -stride);
    count = Math.max(0, count);
    TemplateRun run = CURRENT.get();
    int max = run != null ? run.limits.maxRange() : TemplateLimits.DEFAULT.maxRange();
    if (count > max) {
      String reason = "range() of " + count + " values (at most " + max + ")";
      if (run != null) run.refuse(reason);
      throw new LimitExceeded(reason);
    }
    return new LazyRange(start, stride, (int) count);
  }

  private static long ceilDiv(long a, long b) {
    // a and b come from values within ±2^53 (see integer), so neither the sum nor the quotient overflows
    return a <= 0 ? 0 : (a + b - 1) / b;
  }

  private static long integer(Object o) {
    if (o instanceof Number n) {
      double d = n.doubleValue();
      if (d != Math.rint(d) || Math.abs(d) > (1L << 53)) throw new IllegalArgumentException("range() takes integers, not " + o);
      return n.longValue();
    }
    throw new IllegalArgumentException("range() takes integers, not '" + o + "'");
  }

  /** start, start + stride, ... (count values), computed on demand; each value read is a step. */
  private static final class LazyRange extends AbstractList<Long> {
    private final long start, stride;
    private final int count;

    LazyRange(long start, long stride, int count) {
      this.start = start;
      this.stride = stride;
      this.count = count;
    }

    @Override
    public Long get(int i) {
      if (i < 0 || i >= count) throw new IndexOutOfBoundsException("range index " + i + " of " + count);
      step();
      return start + stride * i;
    }

    @Override
    public int size() {
      return count;
    }
  }
}
