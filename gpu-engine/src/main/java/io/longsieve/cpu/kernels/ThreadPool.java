package io.longsieve.cpu.kernels;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A fixed set of daemon worker threads for data-parallel loops. {@link #forRange} splits [0, n)
 * into contiguous slices, one per worker, and runs the last slice on the calling thread;
 * {@link #forEach} hands out tasks one at a time, so uneven tasks (causal attention tiles) and a
 * worker that the OS preempts (a shared machine) do not leave the others idle.
 */
public final class ThreadPool implements AutoCloseable {

  /** Body of a parallel loop over tasks: runs task t. */
  @FunctionalInterface
  public interface TaskBody {
    void run(int task);
  }

  /** Body of a parallel loop over [from, to). */
  @FunctionalInterface
  public interface RangeBody {
    void run(int from, int to);
  }

  private static final AtomicInteger POOLS = new AtomicInteger();

  private final int threads;
  private final ExecutorService workers;
  private final Future<?>[] pending;

  public ThreadPool(int threads) {
    this.threads = threads <= 0 ? Runtime.getRuntime().availableProcessors() : threads;
    int id = POOLS.incrementAndGet();
    AtomicInteger n = new AtomicInteger();
    this.workers = this.threads == 1 ? null : Executors.newFixedThreadPool(this.threads - 1, r -> {
      Thread t = new Thread(r, "longsieve-cpu-" + id + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
    this.pending = new Future<?>[this.threads];
  }

  public int threads() {
    return threads;
  }

  /** Runs body over [0, n) split into at most {@code threads} slices; returns when all are done. */
  public synchronized void forRange(int n, RangeBody body) {
    int parts = Math.min(threads, n);
    if (parts <= 1) {
      if (n > 0) body.run(0, n);
      return;
    }
    for (int p = 0; p < parts - 1; p++) {
      int from = (int) ((long) n * p / parts), to = (int) ((long) n * (p + 1) / parts);
      pending[p] = workers.submit(() -> body.run(from, to));
    }
    RuntimeException failure = null;
    try {
      body.run((int) ((long) n * (parts - 1) / parts), n);
    } catch (RuntimeException e) {
      failure = e;
    }
    awaitWorkers(parts - 1, failure);
  }

  /**
   * Runs body(t) for every t in [0, n), each task claimed by whichever thread is free next (the
   * caller works too); returns when all are done. Order tasks heaviest first for the best balance.
   * A task's result must not depend on which thread runs it.
   */
  public synchronized void forEach(int n, TaskBody body) {
    int parts = Math.min(threads, n);
    if (parts <= 1) {
      for (int t = 0; t < n; t++) body.run(t);
      return;
    }
    AtomicInteger next = new AtomicInteger();
    Runnable claim = () -> {
      for (int t = next.getAndIncrement(); t < n; t = next.getAndIncrement()) body.run(t);
    };
    for (int p = 0; p < parts - 1; p++) pending[p] = workers.submit(claim);
    RuntimeException failure = null;
    try {
      claim.run();
    } catch (RuntimeException e) {
      failure = e;
      next.set(n); // the others stop claiming
    }
    awaitWorkers(parts - 1, failure);
  }

  /**
   * Waits for the first {@code count} submitted parts, so no work of this call outlives it, then throws
   * the caller's own failure, else the first worker's, if any.
   */
  private void awaitWorkers(int count, RuntimeException failure) {
    for (int p = 0; p < count; p++) {
      try {
        pending[p].get();
      } catch (Exception e) {
        if (failure == null) failure = new RuntimeException("parallel loop failed", e.getCause() != null ? e.getCause() : e);
      }
      pending[p] = null;
    }
    if (failure != null) throw failure;
  }

  @Override
  public void close() {
    if (workers != null) workers.shutdownNow();
  }
}
