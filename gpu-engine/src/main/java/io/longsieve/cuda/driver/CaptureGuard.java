package io.longsieve.cuda.driver;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * Keeps a CUDA graph capture ({@link CudaGraph#capture}) apart from work that would tie the legacy
 * stream or the whole device to the capturing stream, per GPU and across every engine of the process.
 *
 * <p>Why: each engine's {@link CudaContext} is the device's primary context, shared by all engines
 * on that GPU in the JVM, and their streams are blocking streams (they order after the legacy
 * stream). A synchronous copy or memset (on the legacy stream), a device allocation or free, or a
 * context synchronisation made by another thread while one stream captures would make that work
 * depend on the capturing stream: the driver then invalidates the capture
 * (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED at the capturing thread's next launch), whatever the
 * capture mode, since the dependency is a property of the streams, not of the thread. Two engines on
 * one GPU (a test's reference engine beside the engine under test; several task threads of one
 * executor) did exactly that. So every such call takes this device's guard shared ({@link #sync})
 * and a capture takes it alone ({@link #capture}): a capture waits for the calls in flight and the
 * calls wait for the capture (microseconds to a millisecond: the launches of one decode step).
 * A thread that captures may still take the shared side (the lock is reentrant for it), where the
 * driver refuses the call itself, as before.
 *
 * <p>Thread-safe.
 */
public final class CaptureGuard {
  private CaptureGuard() {}

  private static final ConcurrentHashMap<Integer, ReentrantReadWriteLock> LOCKS = new ConcurrentHashMap<>();

  /** The guard held; closing it releases it (no checked exception, for try-with-resources). */
  public interface Held extends AutoCloseable {
    @Override
    void close();
  }

  /**
   * Held around a call that ties the legacy stream or the device to other streams: synchronous
   * copies and memsets, cuMemAlloc/cuMemFree, module loads, cuCtxSynchronize on GPU {@code ordinal}.
   */
  public static Held sync(int ordinal) {
    return hold(lock(ordinal).readLock());
  }

  /** Held from the beginning of a capture on GPU {@code ordinal} to its end. */
  static Held capture(int ordinal) {
    return hold(lock(ordinal).writeLock());
  }

  private static Held hold(Lock l) {
    l.lock();
    return l::unlock;
  }

  private static ReentrantReadWriteLock lock(int ordinal) {
    return LOCKS.computeIfAbsent(ordinal, o -> new ReentrantReadWriteLock());
  }
}
