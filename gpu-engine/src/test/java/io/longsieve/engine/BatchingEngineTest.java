package io.longsieve.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.cpu.CpuRunner;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.GenerationTimeoutException;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.RequestLimits;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * Continuous batching: many threads on one engine get exactly what each request gives alone,
 * decode steps really batch, and the KV budget bounds what is admitted.
 */
class BatchingEngineTest {

  static final Path MODEL = Goldens.MODELS.resolve("llama-gqa");

  /** One caller's request with the limits it runs under (null: none). */
  record Call(GenerationRequest request, RequestLimits limits) {
    Supplier<GenerationResult> on(Engine e) {
      return () -> limits == null ? e.generate(request) : limits.with(() -> e.generate(request));
    }
  }

  static String words(int n, int salt) {
    String[] w = {"river", "stone", "light", "north", "apple", "quiet", "seven", "cloud", "sea", "of", "the", "and"};
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < n; i++) sb.append(w[(i * 7 + salt * 3 + i / 5) % w.length]).append(' ');
    return sb.toString().trim();
  }

  static List<Call> mixedCalls(String longPrompt) {
    List<Call> calls = new ArrayList<>();
    SamplingParams hot = new SamplingParams(1.3, 0.9, 7);
    calls.add(new Call(GenerationRequest.raw("short-greedy", "The river", 24), null));
    calls.add(new Call(GenerationRequest.raw("long-greedy", words(150, 1), 16), null));
    calls.add(new Call(GenerationRequest.chat("chat-topp", words(40, 2), 30).withSampling(hot), null));
    calls.add(new Call(GenerationRequest.raw("topp-seed2", words(25, 3), 20)
        .withSampling(new SamplingParams(1.5, 0.95, 2)), null));
    calls.add(new Call(GenerationRequest.raw("one-token", words(60, 4), 1), null));
    calls.add(new Call(GenerationRequest.raw("zero-tokens", words(10, 5), 0), null));
    calls.add(new Call(GenerationRequest.raw("stops", words(30, 6), 30).withStopStrings(List.of("e", "zz")), null));
    calls.add(new Call(GenerationRequest.raw("streaming", words(140, 7), 18).withPolicy(PolicySpec.parse("streaming:sinks=4,recent=64")),
        null));
    calls.add(new Call(GenerationRequest.raw("selkv", words(130, 8), 18).withPolicy(PolicySpec.parse("selkv:ratio=0.25")), null));
    calls.add(new Call(GenerationRequest.raw("tokenselect", words(120, 9), 12)
        .withPolicy(PolicySpec.parse("tokenselect:sinks=4,k=32,window=32,chunk=64")), null));
    calls.add(new Call(GenerationRequest.raw("small-chunks", words(90, 10), 14), RequestLimits.of(0, 3)));
    calls.add(new Call(GenerationRequest.raw("context-full", words(100, 11), 500), null));
    calls.add(new Call(GenerationRequest.raw("too-long", longPrompt, 4), null));
    calls.add(new Call(GenerationRequest.raw("timed-out", words(50, 12), 8), RequestLimits.of(1, 0)));
    return calls;
  }

  /** A result or the class of what was thrown, for comparing one run with another. */
  record Outcome(GenerationResult result, Class<?> failure) {}

  static Outcome outcome(Supplier<GenerationResult> body) {
    try {
      return new Outcome(body.get(), null);
    } catch (RuntimeException e) {
      return new Outcome(null, e.getClass());
    }
  }

  /**
   * Runs the calls on one thread each. Admission is held until {@code queued} requests wait (or a
   * few seconds pass), so the batching the assertions count does not depend on thread timing.
   */
  static List<Outcome> concurrently(Engine engine, List<Call> calls, int queued) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(calls.size());
    CountDownLatch start = new CountDownLatch(1);
    BatchingEngine be = (BatchingEngine) engine;
    be.pauseAdmission(true);
    try {
      List<Future<Outcome>> fs = new ArrayList<>();
      for (Call c : calls) {
        fs.add(pool.submit(() -> {
          start.await();
          return outcome(c.on(engine));
        }));
      }
      start.countDown();
      for (long t0 = System.nanoTime(); be.waiting() < queued && System.nanoTime() - t0 < 10_000_000_000L; ) {
        Thread.sleep(5);
      }
      be.pauseAdmission(false);
      List<Outcome> out = new ArrayList<>();
      for (Future<Outcome> f : fs) out.add(f.get());
      return out;
    } finally {
      be.pauseAdmission(false);
      pool.shutdown();
    }
  }

  static void assertSame(Outcome alone, Outcome together, String id) {
    assertEquals(alone.failure(), together.failure(), id + ": failure");
    if (alone.failure() != null) {
      assertNull(together.result(), id);
      return;
    }
    GenerationResult a = alone.result(), b = together.result();
    assertEquals(a.id(), b.id());
    assertArrayEquals(a.tokenIds(), b.tokenIds(), id + ": token ids");
    assertEquals(a.text(), b.text(), id + ": text");
    assertEquals(a.finishReason(), b.finishReason(), id + ": finish reason");
    GenerationStats s = a.stats(), t = b.stats();
    assertEquals(s.inputTokens(), t.inputTokens(), id);
    assertEquals(s.outputTokens(), t.outputTokens(), id);
    assertEquals(s.policy(), t.policy(), id);
    assertEquals(s.kvBytesBefore(), t.kvBytesBefore(), id);
    assertEquals(s.policyStats().kvBytesAfter(), t.policyStats().kvBytesAfter(), id);
    assertEquals(s.policyStats().sparseLayers(), t.policyStats().sparseLayers(), id);
    assertEquals(s.policyStats().attendedTokensMean(), t.policyStats().attendedTokensMean(), 0.0, id);
    assertArrayEquals(s.policyStats().selectedFractionByLayer(), t.policyStats().selectedFractionByLayer(), id);
    assertEquals(s.policyStats().selectionCacheHitRate(), t.policyStats().selectionCacheHitRate(), 0.0, id);
    assertTrue(t.ttftMs() > 0 && t.totalMs() >= t.ttftMs(), id + ": timings");
  }

  @Test
  void concurrentTasksOnOneEngineGetWhatEachGetsAlone() throws Exception {
    EngineSpec spec = EngineSpec.of(MODEL).withDevice("cpu").withThreads(2).withPrefillChunk(16).withMaxContext(192)
        .withMaxBatch(6);
    try (Engine engine = Backends.open(spec)) {
      List<Call> calls = mixedCalls(words(400, 13));
      List<Outcome> alone = new ArrayList<>();
      for (Call c : calls) alone.add(outcome(c.on(engine)));
      EngineCounters before = engine.counters();
      assertEquals(0, before.batchedDecodeSteps(), "one at a time never batches");

      List<Outcome> together = concurrently(engine, calls, calls.size() - 1); // all but the one too long
      for (int i = 0; i < calls.size(); i++) assertSame(alone.get(i), together.get(i), calls.get(i).request().id());

      assertEquals(PromptTooLongException.class, together.get(calls.size() - 2).failure());
      assertEquals(GenerationTimeoutException.class, together.get(calls.size() - 1).failure());
      assertEquals(FinishReason.CONTEXT_FULL, together.get(calls.size() - 3).result().finishReason());
      assertTrue(together.stream().anyMatch(o -> o.result() != null
          && o.result().finishReason() == FinishReason.STOP_STRING), "the stop-string case stopped on its string");

      EngineCounters after = engine.counters();
      assertTrue(after.batchedDecodeSteps() > 0, "decode steps with more than one sequence: " + after);
      assertTrue(after.peakBatch() > 1 && after.peakBatch() <= 6, after.toString());
      assertTrue(after.peakSequences() <= 6, after.toString());
      assertTrue(after.failed() >= 2, "both timeouts reached the scheduler and failed there: " + after);
    }
  }

  @Test
  void kvBudgetBoundsTheAdmittedSequences() throws Exception {
    EngineSpec base = EngineSpec.of(MODEL).withDevice("cpu").withThreads(2);
    List<Call> calls = new ArrayList<>();
    for (int i = 0; i < 6; i++) calls.add(new Call(GenerationRequest.raw("d" + i, words(30, i), 12), null));
    ModelConfig c;
    int capacity = 0;
    List<Outcome> alone = new ArrayList<>();
    try (Engine one = Backends.open(base.withMaxBatch(1))) {
      c = one.model().config();
      for (Call call : calls) {
        capacity = Math.max(capacity, one.promptTokens(call.request()).length + 12);
        alone.add(outcome(call.on(one)));
      }
      assertEquals(1, one.counters().peakBatch());
    }
    long perSlot = (long) c.numLayers() * (3L * c.kvDim() * Float.BYTES + Integer.BYTES); // the CPU runner's slots
    long budget = 2L * capacity * perSlot + perSlot; // room for two requests, not three
    try (Engine engine = Backends.open(base.withKvBudgetBytes(budget))) {
      List<Outcome> together = concurrently(engine, calls, calls.size());
      for (int i = 0; i < calls.size(); i++) assertSame(alone.get(i), together.get(i), calls.get(i).request().id());
      EngineCounters k = engine.counters();
      assertEquals(budget, k.kvBudgetBytes());
      assertTrue(k.peakKvReservedBytes() <= budget, k.toString());
      assertTrue(k.peakSequences() <= 2, "the budget admits two at a time: " + k);
      assertTrue(k.batchedDecodeSteps() > 0, k.toString());
      assertEquals(6, k.requests());
    }
  }

  @Test
  void aListOfRequestsFromOneCallerIsBatchedAndKeepsOrder() {
    try (Engine engine = Backends.open(EngineSpec.of(MODEL).withDevice("cpu").withThreads(1))) {
      List<GenerationRequest> rs = new ArrayList<>();
      for (int i = 0; i < 5; i++) rs.add(GenerationRequest.raw("r" + i, words(10 + 9 * i, i), 10));
      List<GenerationResult> alone = new ArrayList<>();
      for (GenerationRequest r : rs) alone.add(engine.generate(r));
      BatchingEngine be = (BatchingEngine) engine;
      be.pauseAdmission(true); // the scheduler starts once the whole list is queued
      var pending = java.util.concurrent.CompletableFuture.supplyAsync(() -> engine.generate(rs));
      while (be.waiting() < rs.size() && !pending.isDone()) Thread.onSpinWait();
      be.pauseAdmission(false);
      List<GenerationResult> together = pending.join();
      for (int i = 0; i < rs.size(); i++) {
        assertSame(new Outcome(alone.get(i), null), new Outcome(together.get(i), null), "r" + i);
        assertEquals(1.0, alone.get(i).stats().decodeBatchMean(), "alone, every decode step held one sequence");
        double shared = together.get(i).stats().decodeBatchMean();
        assertTrue(shared > 1 && shared <= rs.size(), "decoded together with others: " + shared);
      }
      assertTrue(engine.counters().batchedDecodeSteps() > 0, engine.counters().toString());
    }
  }

  @Test
  void anOpenThatRunsOutOfMemoryWaitsForARunningRequestInsteadOfFailing() throws Exception {
    LoadedModel model = LoadedModel.load(MODEL);
    ModelRunner cpu;
    try (Checkpoint ck = Checkpoint.open(MODEL)) {
      cpu = new CpuRunner(model.config(), ck, 1, 512, MODEL);
    }
    List<Call> calls = new ArrayList<>();
    for (int i = 0; i < 5; i++) calls.add(new Call(GenerationRequest.raw("m" + i, words(20 + 10 * i, i), 10), null));
    try (Engine engine = new BatchingEngine(model, new LimitedRunner(cpu, 2), 2048, PolicySpec.DENSE, 5, 0)) {
      List<Outcome> alone = new ArrayList<>();
      for (Call c : calls) alone.add(outcome(c.on(engine)));
      List<Outcome> together = concurrently(engine, calls, calls.size());
      for (int i = 0; i < calls.size(); i++) assertSame(alone.get(i), together.get(i), calls.get(i).request().id());
      EngineCounters k = engine.counters();
      assertTrue(k.deferredOpens() > 0, "opens beyond two ran out of memory and waited: " + k);
      assertEquals(0, k.failed(), k.toString());
      assertTrue(k.peakBatch() == 2, "two sequences fit, and they were batched: " + k);
      assertTrue(k.peakSequences() <= 2, k.toString());
    }
  }

  @Test
  void closingFailsWhatIsStillQueued() throws Exception {
    BatchingEngine engine = (BatchingEngine) Backends.open(EngineSpec.of(MODEL).withDevice("cpu").withThreads(1));
    ExecutorService pool = Executors.newFixedThreadPool(3);
    try {
      engine.pauseAdmission(true);
      List<Future<Outcome>> fs = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        GenerationRequest r = GenerationRequest.raw("q" + i, words(20, i), 50);
        fs.add(pool.submit(() -> outcome(() -> engine.generate(r))));
      }
      for (long t0 = System.nanoTime(); engine.waiting() < 3 && System.nanoTime() - t0 < 10_000_000_000L; ) {
        Thread.sleep(5);
      }
      engine.close();
      for (Future<Outcome> f : fs) assertEquals(IllegalStateException.class, f.get().failure());
    } finally {
      pool.shutdown();
    }
    assertInstanceOf(IllegalStateException.class, outcomeError(engine), "a closed engine takes no request");
  }

  private static Object outcomeError(Engine closed) {
    try {
      closed.generate(GenerationRequest.raw("late", "hi", 2));
      return null;
    } catch (RuntimeException e) {
      return e;
    }
  }
}
