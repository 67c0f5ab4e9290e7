package io.longsieve.engine;

import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.Sampler;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The one thread that owns a runner and drives every admitted request: continuous batching. Each
 * round it admits waiting requests (first come, first served) while fewer than maxBatch run and
 * their reserved KV (capacity slots × {@link ModelRunner#kvBytesPerSlot}) fits the budget, runs one
 * prefill part of the oldest prefilling request, then one decode step for every decoding request
 * together ({@link ModelRunner#decodeBatch}). Finished requests complete their futures. Work that needs
 * the runner alone (a driven run, {@link Engine#drive}) waits in its own queue: while it waits nothing new
 * is admitted, and it runs as soon as no request is active.
 *
 * <p>Failure semantics: a request that fails (its sequence cannot be opened, a prefill part or its
 * sampling throws, it passes its deadline) fails only its own future; the others go on. An exception
 * from a batched decode step cannot be pinned on one request and fails every request in that step.
 * A request alone larger than the budget still runs when nothing else does, so it never waits
 * forever. A sequence that cannot be opened for lack of memory (the CUDA backend allocates its KV
 * pages at open and the engine sets it no byte budget by default) while others run is not failed:
 * it goes back to the head of the queue and admission pauses until a running request ends; only
 * when it fails with nothing else running does it fail. {@link #close} fails whatever has not finished with {@link IllegalStateException}.
 *
 * <p>Prefix reuse (with a {@link PrefixCache}): an admitted request that shares a prompt prefix
 * ({@link GenerationTask#prefixKey}) opens as a fork of the kept prefix when it is ready; when another
 * request is still computing it, it waits (admitted, not opened) and forks as soon as that request
 * keeps it, after the prefill part that ends there; when none is kept, it computes and keeps it itself.
 * A request computing a prefix that fails or leaves before keeping it fails alone: the first request
 * waiting for it computes it instead. Forks are sequences like any other: they batch, fail and finish
 * on their own.
 */
final class BatchScheduler implements AutoCloseable {

  private static final Logger LOG = Logger.getLogger(BatchScheduler.class.getName());

  /** A submitted request and where its result goes. */
  record Pending(GenerationTask task, long kvBytes, CompletableFuture<GenerationResult> future) {}

  /** Work that needs the runner alone (a driven run, {@link #runAlone}) and where its result goes. */
  private record Alone<T>(Supplier<T> work, CompletableFuture<T> future) {
    void run() {
      if (future.isDone()) return; // the caller gave up
      try {
        future.complete(work.get());
      } catch (Throwable e) {
        future.completeExceptionally(e);
      }
    }
  }

  private final ModelRunner runner;
  private final int maxBatch;
  private final long kvBudget;
  private final long bytesPerSlot;
  private final Thread thread;
  private final Object lock = new Object();
  private final ArrayDeque<Pending> waiting = new ArrayDeque<>(); // guarded by lock
  private final ArrayDeque<Alone<?>> alone = new ArrayDeque<>();  // guarded by lock: wait for no request to run
  private boolean closed;                                          // guarded by lock
  private int active;                                              // guarded by lock: admitted, not finished
  private long reserved;                                           // guarded by lock: their KV bytes
  private boolean paused;                                          // guarded by lock: tests hold admission
  private boolean held;                                            // guarded by lock: an open ran out of memory;
                                                                   //   admit nothing until a request ends
  private final List<String> releases = new ArrayList<>();        // guarded by lock: prefix scopes that ended
  private final PrefixCache prefixes;                              // null: prefix reuse off
  // scheduler thread only: requests waiting for a prefix another one computes, and who computes which
  private final Map<PrefixCache.Entry, List<Pending>> parked = new LinkedHashMap<>();
  private final Map<Pending, PrefixCache.Entry> producing = new HashMap<>();
  // scheduler thread only
  private final List<Pending> prefilling = new ArrayList<>();
  private final List<Pending> decoding = new ArrayList<>();
  private final ModelRunner.Sequence[] seqs;  // (maxBatch) one decode step's inputs and outputs
  private final int[] tokens;
  private final int[] positions;
  private final float[][] logits;
  private final Sampler[] samplers;
  private final int[] next;
  private final Pending[] inStep;
  // counters, guarded by lock
  private long requests, failed, deferred, prefillParts, decodeSteps, batchedDecodeSteps, decodedTokens, peakKv;
  private int peakBatch, peakSequences;

  BatchScheduler(ModelRunner runner, int maxBatch, long kvBudget) {
    this(runner, maxBatch, kvBudget, null);
  }

  /** @param prefixes the kept prompt prefixes requests may share; null: no prefix reuse */
  BatchScheduler(ModelRunner runner, int maxBatch, long kvBudget, PrefixCache prefixes) {
    this.runner = runner;
    this.prefixes = prefixes;
    this.maxBatch = maxBatch;
    this.kvBudget = kvBudget;
    this.bytesPerSlot = runner.kvBytesPerSlot();
    seqs = new ModelRunner.Sequence[maxBatch];
    tokens = new int[maxBatch];
    positions = new int[maxBatch];
    logits = new float[maxBatch][];
    samplers = new Sampler[maxBatch];
    next = new int[maxBatch];
    inStep = new Pending[maxBatch];
    thread = new Thread(this::loop, "longsieve-scheduler");
    thread.setDaemon(true);
    thread.start();
  }

  /** Queues a task (not yet opened); the future completes with its result or its failure. */
  CompletableFuture<GenerationResult> submit(GenerationTask task) {
    Pending p = new Pending(task, (long) task.capacity() * bytesPerSlot, new CompletableFuture<>());
    synchronized (lock) {
      if (closed) throw new IllegalStateException("the engine is closed");
      waiting.add(p);
      lock.notifyAll();
    }
    return p.future;
  }

  /**
   * Runs {@code work} on the scheduler's thread with the runner to itself: while it waits no request is
   * admitted, the running ones finish, then it runs and admission resumes. Its failure fails only its future.
   */
  <T> CompletableFuture<T> runAlone(Supplier<T> work) {
    Alone<T> a = new Alone<>(work, new CompletableFuture<>());
    synchronized (lock) {
      if (closed) throw new IllegalStateException("the engine is closed");
      alone.add(a);
      lock.notifyAll();
    }
    return a.future;
  }

  /** Holds (or releases) admission: requests queue but none starts. For tests that need a full queue. */
  void pause(boolean p) {
    synchronized (lock) {
      paused = p;
      lock.notifyAll();
    }
  }

  /** Requests queued and not yet admitted. */
  int waiting() {
    synchronized (lock) {
      return waiting.size();
    }
  }

  /** Drops the prefixes kept under scope, on the scheduler thread (which owns them) at its next round. */
  void releasePrefixes(String scope) {
    if (prefixes == null) return;
    synchronized (lock) {
      if (closed) return;
      releases.add(scope);
      lock.notifyAll();
    }
  }

  PrefixCounters prefixCounters() {
    return prefixes == null ? PrefixCounters.NONE : prefixes.counters();
  }

  EngineCounters counters() {
    synchronized (lock) {
      return new EngineCounters(requests, failed, deferred, prefillParts, decodeSteps, batchedDecodeSteps, decodedTokens,
          peakBatch, peakSequences, peakKv, maxBatch, kvBudget);
    }
  }

  private void loop() {
    try {
      while (true) {
        List<Pending> admitted = new ArrayList<>();
        List<String> ended;
        Alone<?> runAlone = null;
        synchronized (lock) {
          while (!closed && (waiting.isEmpty() || paused) && active == 0 && releases.isEmpty() && alone.isEmpty()) {
            lock.wait();
          }
          if (closed) break;
          ended = new ArrayList<>(releases);
          releases.clear();
          if (active == 0) runAlone = alone.poll();
          while (alone.isEmpty() && runAlone == null && !paused && !waiting.isEmpty() && active < maxBatch
              && (active == 0 || !held && reserved + waiting.peek().kvBytes <= kvBudget)) {
            Pending p = waiting.poll();
            active++;
            reserved += p.kvBytes;
            admitted.add(p);
          }
        }
        for (String scope : ended) prefixes.release(scope);
        if (runAlone != null) { // a driven run: no request is active, so none is parked on a prefix either
          runAlone.run();
          continue;
        }
        startAll(admitted);
        synchronized (lock) { // after any deferral: what actually holds memory now
          peakSequences = Math.max(peakSequences, active);
          peakKv = Math.max(peakKv, reserved);
        }
        dropCancelled(prefilling);
        dropCancelled(decoding);
        for (List<Pending> w : new ArrayList<>(parked.values())) dropCancelled(w);
        if (!prefilling.isEmpty()) prefillPart(prefilling.get(0));
        if (!decoding.isEmpty()) decodeStep();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Throwable e) {
      LOG.log(Level.SEVERE, "the batch scheduler stopped", e);
      synchronized (lock) {
        closed = true;
      }
    }
    IllegalStateException gone = new IllegalStateException("the engine was closed before the request finished");
    List<Pending> waitingForPrefix = new ArrayList<>();
    for (List<Pending> w : parked.values()) waitingForPrefix.addAll(w);
    parked.clear();
    for (Pending p : waitingForPrefix) fail(p, gone);
    for (Pending p : new ArrayList<>(prefilling)) fail(p, gone);
    for (Pending p : new ArrayList<>(decoding)) fail(p, gone);
    if (prefixes != null) prefixes.closeAll();
    List<Pending> rest;
    List<Alone<?>> restAlone;
    synchronized (lock) {
      rest = new ArrayList<>(waiting);
      waiting.clear();
      restAlone = new ArrayList<>(alone);
      alone.clear();
    }
    for (Pending p : rest) p.future.completeExceptionally(gone);
    for (Alone<?> a : restAlone) a.future.completeExceptionally(gone);
  }

  /**
   * Opens admitted requests in order; one that runs out of memory while others hold it goes back to
   * the queue with everything behind it ({@link #defer}), any other failure fails it alone.
   */
  private void startAll(List<Pending> admitted) {
    List<Pending> again = new ArrayList<>();
    for (Pending p : admitted) {
      if (!again.isEmpty()) {
        again.add(p); // keep the queue's order behind a deferred one
        continue;
      }
      try {
        start(p);
      } catch (Throwable e) {
        if (OutOfMemory.causedBy(e) && !(prefilling.isEmpty() && decoding.isEmpty())) again.add(p);
        else fail(p, e);
      }
    }
    if (!again.isEmpty()) defer(again);
  }

  /**
   * Opens one admitted request: as a fork of its kept prefix when that is ready, parked when another
   * request is computing it, else fresh (and then it keeps its prefix, when it shares one).
   */
  private void start(Pending p) {
    PrefixCache.Key key = prefixes == null ? null : p.task.prefixKey(prefixes.budget());
    if (key == null) {
      p.task.open();
      prefilling.add(p);
      return;
    }
    PrefixCache.Entry e = prefixes.get(key);
    if (e != null && !e.ready()) {
      parked.computeIfAbsent(e, k -> new ArrayList<>()).add(p);
      return;
    }
    if (e != null) {
      p.task.openFork(e.prefix());
      prefixes.forked(e);
      prefilling.add(p);
      return;
    }
    p.task.open();
    p.task.keepAfter(key.tokens());
    producing.put(p, prefixes.produce(key, p.task.prefixScope()));
    prefilling.add(p);
  }

  /**
   * After a producer's prefill part: at its keep point, keeps the prefix and opens the requests that
   * waited for it as forks. A prefix that cannot be kept (out of memory, over the budget) costs reuse
   * only: the producer goes on, and the waiting requests start as if none had been kept.
   */
  private void keepIfDue(Pending p) {
    if (!p.task.atKeepPoint()) return;
    PrefixCache.Entry e = producing.remove(p);
    boolean kept = false;
    try {
      kept = prefixes.keep(e, p.task.keepPrefix());
    } catch (Throwable ex) {
      LOG.log(Level.WARNING, "could not keep a prompt prefix of " + e.key.tokens() + " tokens; its requests prefill it", ex);
      prefixes.abandon(e);
    }
    wake(e, kept);
  }

  /** The requests parked on e start: as forks when it was kept, else anew (the first computes it again). */
  private void wake(PrefixCache.Entry e, boolean kept) {
    List<Pending> w = parked.remove(e);
    if (w == null) return;
    if (!kept) {
      startAll(w);
      return;
    }
    List<Pending> again = new ArrayList<>();
    for (Pending p : w) {
      if (!again.isEmpty()) {
        again.add(p);
        continue;
      }
      try {
        p.task.openFork(e.prefix());
        prefixes.forked(e);
        prefilling.add(p);
      } catch (Throwable ex) {
        if (OutOfMemory.causedBy(ex) && !(prefilling.isEmpty() && decoding.isEmpty())) again.add(p);
        else fail(p, ex);
      }
    }
    if (!again.isEmpty()) defer(again);
  }

  /** Back to the head of the queue, in order; admission waits for a running request to end. */
  private void defer(List<Pending> again) {
    synchronized (lock) {
      for (int i = again.size() - 1; i >= 0; i--) {
        Pending p = again.get(i);
        waiting.addFirst(p);
        active--;
        reserved -= p.kvBytes;
      }
      deferred++;
      held = true;
    }
  }

  private void prefillPart(Pending p) {
    try {
      p.task.prefillStep();
    } catch (Throwable e) {
      fail(p, e);
      return;
    } finally {
      synchronized (lock) {
        prefillParts++;
      }
    }
    if (p.task.prefilling()) {
      if (prefixes != null) keepIfDue(p);
      return;
    }
    prefilling.remove(p);
    if (p.task.done()) complete(p);
    else decoding.add(p);
  }

  private void decodeStep() {
    int n = 0;
    for (Pending p : new ArrayList<>(decoding)) {
      try {
        p.task.checkDeadline();
      } catch (Throwable e) {
        fail(p, e);
        continue;
      }
      GenerationTask t = p.task;
      inStep[n] = p;
      seqs[n] = t.sequence();
      tokens[n] = t.nextToken();
      positions[n] = t.nextPosition();
      logits[n] = t.logits();
      samplers[n] = t.sampler();
      n++;
    }
    if (n == 0) return;
    synchronized (lock) {
      decodeSteps++;
      if (n > 1) batchedDecodeSteps++;
      decodedTokens += n;
      peakBatch = Math.max(peakBatch, n);
    }
    try {
      runner.decodeBatch(seqs, tokens, positions, logits, samplers, next, n);
    } catch (Throwable e) {
      for (int i = 0; i < n; i++) fail(inStep[i], e);
      clearStep(n);
      return;
    }
    for (int i = 0; i < n; i++) {
      Pending p = inStep[i];
      p.task.countDecodeStep(n);
      try {
        p.task.accept(next[i]);
      } catch (Throwable e) {
        fail(p, e);
        continue;
      }
      if (p.task.done()) complete(p);
    }
    clearStep(n);
  }

  private void clearStep(int n) {
    for (int i = 0; i < n; i++) {
      inStep[i] = null;
      seqs[i] = null;
      logits[i] = null;
      samplers[i] = null;
    }
  }

  /** Requests whose caller gave up (interrupted) leave without running further. */
  private void dropCancelled(List<Pending> list) {
    for (Pending p : new ArrayList<>(list)) {
      if (p.future.isDone()) fail(p, new IllegalStateException("cancelled"));
    }
  }

  private void complete(Pending p) {
    decoding.remove(p);
    release(p, false);
    p.future.complete(p.task.result());
  }

  private void fail(Pending p, Throwable e) {
    prefilling.remove(p);
    decoding.remove(p);
    for (List<Pending> w : parked.values()) w.remove(p);
    PrefixCache.Entry computing = producing.remove(p);
    try {
      p.task.close();
    } catch (Throwable closing) {
      e.addSuppressed(closing);
    }
    release(p, true);
    p.future.completeExceptionally(e);
    if (computing != null) { // its prefix was not kept: a request waiting for it computes it instead
      prefixes.abandon(computing);
      wake(computing, false);
    }
  }

  private void release(Pending p, boolean failure) {
    synchronized (lock) {
      active--;
      reserved -= p.kvBytes;
      held = false;
      requests++;
      if (failure) failed++;
    }
  }

  /** Stops the thread; unfinished requests fail. Waits for the step in progress. */
  @Override
  public void close() {
    synchronized (lock) {
      closed = true;
      lock.notifyAll();
    }
    try {
      thread.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
