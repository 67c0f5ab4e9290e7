package io.longsieve.engine;

import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.RequestLimits;
import io.longsieve.policy.PolicySpec;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

/**
 * An engine whose callers share one runner through continuous batching: {@link #generate}
 * tokenizes on the caller's thread, queues the request for the {@link BatchScheduler} and waits for
 * its own result. Concurrent callers (Spark task threads of one executor) are decoded together, one
 * forward pass per step for all of them, and each gets exactly what its request gives alone.
 */
public final class BatchingEngine implements Engine {

  private final LoadedModel model;
  private final ModelRunner runner;
  private final Generator generator;
  private final BatchScheduler scheduler;

  /** @param kvBudgetBytes KV bytes admitted requests may reserve together; 0: the runner's default */
  public BatchingEngine(LoadedModel model, ModelRunner runner, int maxContext, PolicySpec defaultPolicy, int maxBatch,
                 long kvBudgetBytes) {
    this(model, runner, maxContext, defaultPolicy, maxBatch, kvBudgetBytes, 0);
  }

  /**
   * @param kvBudgetBytes     KV bytes admitted requests may reserve together; 0: the runner's default
   * @param prefixCacheBytes  bytes kept prompt prefixes may hold together (prefix reuse); 0: off, so
   *                          {@link SharedPrefix} is ignored; {@link EngineSpec#PREFIX_CACHE_DEFAULT}: the
   *                          runner's default; a runner that keeps no prefixes turns it off
   */
  public BatchingEngine(LoadedModel model, ModelRunner runner, int maxContext, PolicySpec defaultPolicy, int maxBatch,
                 long kvBudgetBytes, long prefixCacheBytes) {
    this.model = model;
    this.runner = runner;
    this.generator = new Generator(model, runner, maxContext, defaultPolicy);
    long prefixBytes = prefixCacheBytes == EngineSpec.PREFIX_CACHE_DEFAULT ? runner.defaultPrefixCacheBytes() : prefixCacheBytes;
    PrefixCache prefixes = prefixBytes > 0 && runner.prefixCuts() != null ? new PrefixCache(prefixBytes) : null;
    this.scheduler = new BatchScheduler(runner, maxBatch,
        kvBudgetBytes > 0 ? kvBudgetBytes : runner.defaultKvBudgetBytes(), prefixes);
  }

  @Override
  public LoadedModel model() {
    return model;
  }

  @Override
  public String backend() {
    return runner.backend();
  }

  @Override
  public String device() {
    return runner.device();
  }

  @Override
  public int maxContext() {
    return generator.maxContext();
  }

  @Override
  public EngineCounters counters() {
    return scheduler.counters();
  }

  @Override
  public PrefixCounters prefixCounters() {
    return scheduler.prefixCounters();
  }

  @Override
  public void releasePrefixes(String scope) {
    scheduler.releasePrefixes(scope);
  }

  /** Holds admission while true (requests queue, none starts): lets tests line up concurrent requests. */
  void pauseAdmission(boolean paused) {
    scheduler.pause(paused);
  }

  /** Requests queued, not yet admitted. */
  int waiting() {
    return scheduler.waiting();
  }

  /**
   * Generates for one request, batched with whatever else runs. The caller's {@link RequestLimits}
   * go with the request. Throws what generating it alone would throw; an interrupt while waiting
   * abandons the request and throws {@link IllegalStateException} with the interrupt flag set.
   */
  @Override
  public GenerationResult generate(GenerationRequest request) {
    return await(submit(request));
  }

  /**
   * Generates for one request whose first {@code shared.tokens()} prompt tokens it shares with other
   * requests: it starts from their kept KV cache when one is (or is being) computed, else computes and
   * keeps it. Results are what the request gives alone.
   */
  @Override
  public GenerationResult generate(GenerationRequest request, SharedPrefix shared) {
    return await(scheduler.submit(generator.start(request, RequestLimits.current(), shared)));
  }

  /**
   * A driven run on the scheduler's thread, alone: the scheduler admits nothing new, lets the running
   * requests finish, runs it, then goes on. Throws what the run threw.
   */
  @Override
  public DrivenRun drive(GenerationRequest request, StepDriver driver, int[] recallPositions) {
    RequestLimits limits = RequestLimits.current();
    return await(scheduler.runAlone(() -> generator.drive(request, driver, recallPositions, limits)));
  }

  /** Submits every request at once so they batch with each other; fails with the first failure in order. */
  @Override
  public List<GenerationResult> generate(List<GenerationRequest> requests) {
    List<CompletableFuture<GenerationResult>> futures = new ArrayList<>(requests.size());
    try {
      for (GenerationRequest r : requests) futures.add(submit(r));
      List<GenerationResult> out = new ArrayList<>(requests.size());
      for (CompletableFuture<GenerationResult> f : futures) out.add(await(f));
      return out;
    } finally {
      for (CompletableFuture<GenerationResult> f : futures) f.cancel(false); // no-op for the finished ones
    }
  }

  private CompletableFuture<GenerationResult> submit(GenerationRequest request) {
    GenerationTask task = generator.start(request, RequestLimits.current());
    return scheduler.submit(task);
  }

  private static <T> T await(Future<T> f) {
    try {
      return f.get();
    } catch (InterruptedException e) {
      f.cancel(false);
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while waiting for generation", e);
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      if (c instanceof RuntimeException re) throw re;
      if (c instanceof Error err) throw err;
      throw new IllegalStateException(c);
    }
  }

  @Override
  public void close() {
    try {
      scheduler.close();
    } finally {
      try {
        runner.close();
      } finally {
        model.close();
      }
    }
  }
}
