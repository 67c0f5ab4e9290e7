package io.longsieve.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.cpu.CpuRunner;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.GenerationTimeoutException;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.RequestLimits;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.model.Checkpoint;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PrefixReuse;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Prefix reuse on the CPU (docs/prefix-reuse.md): every request that starts from a kept prefix gives,
 * token for token, what it gives alone (greedy), under every policy; requests that arrive while the
 * prefix is still being computed wait for it; an evicted prefix is computed again; a request that
 * fails, computing the prefix or forking from it, fails alone; the byte budget holds.
 */
class PrefixReuseTest {

  static final Path MODEL = Goldens.MODELS.resolve("llama-gqa");
  static final int CHUNK = 64;          // prefill chunk: several parts per document
  static final int DOC = 200;           // document tokens, not a multiple of CHUNK
  static final int NEW = 8;
  static final String SCOPE = "test";
  static Engine alone;                  // the reference: no reuse, one request at a time

  @BeforeAll
  static void open() {
    alone = Backends.open(spec());
  }

  @AfterAll
  static void close() {
    alone.close();
  }

  static EngineSpec spec() {
    return EngineSpec.of(MODEL).withDevice("cpu").withThreads(2).withPrefillChunk(CHUNK);
  }

  static BatchingEngine reusing(long budget) {
    return (BatchingEngine) Backends.open(spec().withPrefixCacheBytes(budget));
  }

  /** Question lengths by row: the second is shorter than snapkv's and selkv's window below. */
  static final int[] QUESTION = {9, 5, 13, 8};

  /** A document of random ids (seeded), and a prompt of it plus a question of 5 to 13 ids. */
  static int[] doc(int seed) {
    Random r = new Random(seed);
    int[] d = new int[DOC];
    for (int i = 0; i < DOC; i++) d[i] = 10 + r.nextInt(1000);
    return d;
  }

  static GenerationRequest row(String id, int[] doc, int question, String policy) {
    Random r = new Random(1000 + question);
    int q = QUESTION[question % QUESTION.length];
    int[] ids = java.util.Arrays.copyOf(doc, doc.length + q);
    for (int i = 0; i < q; i++) ids[doc.length + i] = 10 + r.nextInt(1000);
    return GenerationRequest.raw(id, "", NEW).withPromptIds(ids).withMinNewTokens(NEW)
        .withPolicy(PolicySpec.parse(policy));
  }

  static SharedPrefix shared() {
    return new SharedPrefix(DOC, SCOPE);
  }

  static void assertSame(GenerationResult expected, GenerationResult got) {
    assertArrayEquals(expected.tokenIds(), got.tokenIds(), got.id());
    assertEquals(expected.text(), got.text(), got.id());
    assertEquals(expected.finishReason(), got.finishReason(), got.id());
  }

  /** Tokens the rule lets a row of this prompt length reuse on the CPU with CHUNK-token parts. */
  static int reusable(String policy, GenerationRequest r) {
    return PrefixReuse.reusableTokens(PolicySpec.parse(policy), DOC, r.promptIds().length,
        new PrefixReuse.Cuts(CHUNK, true));
  }

  @ParameterizedTest
  @ValueSource(strings = {
      "dense",
      "tokenselect:sinks=4,k=24,window=16,chunk=16",               // Selection Cache off (the default)
      "tokenselect:sinks=4,k=24,window=16,chunk=16,cache=on",      // Selection Cache on, shared with decode
      "tokenselect:sinks=4,k=24,window=16,chunk=16,cache=on,threshold=-1",  // its cache always hits: the fork's first call
                                                                   // reads what the prefix's last one stored
      "tokenselect:sinks=4,k=24,window=16,chunk=16,cache=on + none + dense",  // the prefill's own cache
      "tokenselect:sinks=4,k=24,window=16,chunk=16,index=int4",
      "tsa:tau=0.05,min=16,window=8,layers=all,chunk=64",          // its own chunk: the prefix ends on one
      "tsa:tau=0.05,min=16,window=8,layers=all,chunk=40",          // ... whatever the engine's (CHUNK)
      "snapkv:window=8,capacity=48",
      "selkv:ratio=0.3,window=8",
      "h2o:heavy=0.2,recent=0.1",
      "streaming:sinks=4,recent=48",
      "dense + none + quest:page=8,budget=32,dense_layers=1"})
  void everyRowGivesWhatItGivesAlone(String policy) {
    int[] d = doc(1);
    java.util.Set<Integer> kept = new java.util.HashSet<>(); // prefix lengths a row computed and kept
    try (BatchingEngine engine = reusing(EngineSpec.PREFIX_CACHE_DEFAULT)) {
      for (int q = 0; q < 4; q++) {
        GenerationRequest r = row("q" + q, d, q, policy);
        GenerationResult got = engine.generate(r, shared());
        assertSame(alone.generate(r), got);
        // a row forks when an earlier one kept the prefix its rule allows; else it computes and keeps it
        int l = reusable(policy, r);
        int expected = kept.contains(l) ? l : 0;
        if (l > 0) kept.add(l);
        assertEquals(expected, got.stats().prefixTokensReused(), "row " + q + " under " + policy);
      }
      assertTrue(engine.prefixCounters().forks() >= 1, policy + ": no row reused the prefix " + engine.prefixCounters());
    }
  }

  @Test
  void rowsThatArriveWhileThePrefixIsComputedWaitForIt() throws Exception {
    int[] d = doc(2);
    String policy = "tokenselect:sinks=4,k=24,window=16,chunk=16,cache=on";
    List<GenerationRequest> rows = new ArrayList<>();
    for (int q = 0; q < 4; q++) rows.add(row("q" + q, d, q, policy));
    try (BatchingEngine engine = reusing(EngineSpec.PREFIX_CACHE_DEFAULT)) {
      List<Future<GenerationResult>> got = concurrently(engine, rows, null);
      for (int q = 0; q < rows.size(); q++) assertSame(alone.generate(rows.get(q)), got.get(q).get());
      PrefixCounters c = engine.prefixCounters();
      assertEquals(1, c.kept(), c.toString());
      assertEquals(3, c.forks(), c.toString()); // all three waited: the first's prefill is several parts
    }
  }

  @Test
  void anEvictedPrefixIsComputedAgain() {
    int[] a = doc(3), b = doc(4);
    try (BatchingEngine engine = reusing(prefixBytes() * 3 / 2)) {  // room for one prefix
      List<GenerationRequest> rows = List.of(row("a0", a, 0, "dense"), row("a1", a, 1, "dense"), row("b0", b, 2, "dense"),
          row("b1", b, 3, "dense"), row("a2", a, 4, "dense"));
      int[] reused = new int[rows.size()];
      for (int i = 0; i < rows.size(); i++) {
        GenerationResult got = engine.generate(rows.get(i), shared());
        assertSame(alone.generate(rows.get(i)), got);
        reused[i] = got.stats().prefixTokensReused();
      }
      assertArrayEquals(new int[] {0, DOC, 0, DOC, 0}, reused); // a2 computed a's prefix again
      PrefixCounters c = engine.prefixCounters();
      assertEquals(3, c.kept(), c.toString());
      assertEquals(2, c.evicted(), c.toString());
    }
  }

  @Test
  void theByteBudgetHoldsWithMoreDocumentsThanFit() {
    long budget = prefixBytes() * 5 / 2; // two prefixes fit, not three
    try (BatchingEngine engine = reusing(budget)) {
      for (int doc = 0; doc < 6; doc++) {
        int[] d = doc(10 + doc);
        for (int q = 0; q < 2; q++) {
          GenerationResult got = engine.generate(row("d" + doc + "q" + q, d, q, "dense"), shared());
          assertEquals(q == 0 ? 0 : DOC, got.stats().prefixTokensReused());
          assertTrue(engine.prefixCounters().heldBytes() <= budget, engine.prefixCounters().toString());
        }
      }
      PrefixCounters c = engine.prefixCounters();
      assertTrue(c.peakBytes() <= budget && c.peakBytes() >= 2 * prefixBytes(), c.toString());
      assertEquals(6, c.kept(), c.toString());
      assertEquals(4, c.evicted(), c.toString());
      engine.releasePrefixes(SCOPE);
      // the release runs on the scheduler thread; the next request waits behind it
      engine.generate(GenerationRequest.raw("after", "x", 1));
      assertEquals(0, engine.prefixCounters().heldBytes(), engine.prefixCounters().toString());
    }
  }

  @Test
  void aPrefixOverTheBudgetIsNotKeptAndNothingChanges() {
    int[] d = doc(5);
    try (BatchingEngine engine = reusing(prefixBytes() / 2)) {
      for (int q = 0; q < 2; q++) {
        GenerationRequest r = row("q" + q, d, q, "dense");
        GenerationResult got = engine.generate(r, shared());
        assertSame(alone.generate(r), got);
        assertEquals(0, got.stats().prefixTokensReused());
      }
      assertEquals(0, engine.prefixCounters().kept());
    }
  }

  @Test
  void reuseOffIgnoresTheSharedPrefix() {
    int[] d = doc(6);
    try (BatchingEngine engine = reusing(0)) {
      engine.generate(row("q0", d, 0, "dense"), shared());
      assertEquals(0, engine.generate(row("q1", d, 1, "dense"), shared()).stats().prefixTokensReused());
      assertEquals(PrefixCounters.NONE, engine.prefixCounters());
    }
  }

  @Test
  void aRowThatFailsComputingThePrefixHandsItToTheNext() throws Exception {
    int[] d = doc(7);
    List<GenerationRequest> rows = new ArrayList<>();
    for (int q = 0; q < 3; q++) rows.add(row("q" + q, d, q, "dense"));
    LoadedModel model = LoadedModel.load(MODEL);
    ModelRunner cpu;
    try (Checkpoint ck = Checkpoint.open(MODEL)) {
      cpu = new CpuRunner(model.config(), ck, 2, CHUNK, MODEL);
    }
    // the first sequence opened fails in its second prefill part, after the first was cached
    try (BatchingEngine engine = new BatchingEngine(model, new FailingRunner(cpu), 2048, PolicySpec.DENSE, 8, 0,
        EngineSpec.PREFIX_CACHE_DEFAULT)) {
      List<Future<GenerationResult>> got = concurrently(engine, rows, null);
      Exception e = assertThrows(java.util.concurrent.ExecutionException.class, () -> got.get(0).get());
      assertEquals("injected", e.getCause().getMessage());
      for (int q = 1; q < rows.size(); q++) assertSame(alone.generate(rows.get(q)), got.get(q).get());
      assertEquals(0, got.get(1).get().stats().prefixTokensReused()); // it computed the prefix instead
      assertEquals(DOC, got.get(2).get().stats().prefixTokensReused());
    }
  }

  @Test
  void aForkThatFailsFailsAlone() throws Exception {
    int[] d = doc(8);
    List<GenerationRequest> rows = new ArrayList<>();
    for (int q = 0; q < 3; q++) rows.add(row("q" + q, d, q, "dense"));
    try (BatchingEngine engine = reusing(EngineSpec.PREFIX_CACHE_DEFAULT)) {
      // the second row's deadline has passed when it would start from the prefix
      List<Future<GenerationResult>> got = concurrently(engine, rows, RequestLimits.of(1, 0));
      Exception e = assertThrows(java.util.concurrent.ExecutionException.class, () -> got.get(1).get());
      assertInstanceOf(GenerationTimeoutException.class, e.getCause());
      assertSame(alone.generate(rows.get(0)), got.get(0).get());
      assertSame(alone.generate(rows.get(2)), got.get(2).get());
      assertEquals(DOC, got.get(2).get().stats().prefixTokensReused());
    }
  }

  /** Bytes the CPU keeps for one DOC-token dense prefix. */
  static long prefixBytes() {
    try (BatchingEngine e = reusing(EngineSpec.PREFIX_CACHE_DEFAULT)) {
      e.generate(row("p0", doc(99), 0, "dense"), shared());
      return e.prefixCounters().heldBytes();
    }
  }

  /**
   * The rows submitted in order while admission is held, then let go together: the first computes the
   * prefix while the others wait. Row 1 runs under {@code secondLimits} when given.
   */
  static List<Future<GenerationResult>> concurrently(BatchingEngine engine, List<GenerationRequest> rows,
                                                     RequestLimits secondLimits) throws Exception {
    return concurrently(engine, rows, shared(), secondLimits);
  }

  /** {@link #concurrently} with the rows sharing {@code shared} (CudaPrefixReuseTest's document). */
  static List<Future<GenerationResult>> concurrentlyOn(BatchingEngine engine, List<GenerationRequest> rows,
                                                       SharedPrefix shared) throws Exception {
    return concurrently(engine, rows, shared, -1, null);
  }

  /** As above, row {@code limited} under {@code limits}. */
  static List<Future<GenerationResult>> concurrentlyOn(BatchingEngine engine, List<GenerationRequest> rows,
      SharedPrefix shared, int limited, RequestLimits limits) throws Exception {
    return concurrently(engine, rows, shared, limited, limits);
  }

  private static List<Future<GenerationResult>> concurrently(BatchingEngine engine, List<GenerationRequest> rows,
      SharedPrefix shared, RequestLimits secondLimits) throws Exception {
    return concurrently(engine, rows, shared, 1, secondLimits);
  }

  private static List<Future<GenerationResult>> concurrently(BatchingEngine engine, List<GenerationRequest> rows,
      SharedPrefix shared, int limited, RequestLimits secondLimits) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(rows.size());
    List<Future<GenerationResult>> out = new ArrayList<>();
    engine.pauseAdmission(true);
    try {
      for (int i = 0; i < rows.size(); i++) {
        GenerationRequest r = rows.get(i);
        Supplier<GenerationResult> call = () -> engine.generate(r, shared);
        RequestLimits limits = i == limited ? secondLimits : null;
        out.add(pool.submit(() -> limits == null ? call.get() : limits.with(call)));
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (engine.waiting() < i + 1 && System.nanoTime() < until) Thread.sleep(1); // queue order = row order
      }
    } finally {
      engine.pauseAdmission(false);
      pool.shutdown();
    }
    return out;
  }

  /** The CPU runner whose first sequence fails in its second prefill part. */
  private static final class FailingRunner extends DelegatingRunner {
    private int opened; // the scheduler thread only

    FailingRunner(ModelRunner inner) {
      super(inner);
    }

    @Override
    public Sequence open(int capacity, PolicySpec policy) {
      Sequence s = inner.open(capacity, policy);
      if (opened++ > 0) return new DelegatingSequence(s);
      return new DelegatingSequence(s) {
        int parts;

        @Override
        public int prefillPart(int[] tokens, int from, int to, float[] logits, Sampler sampler) {
          if (++parts == 2) throw new IllegalStateException("injected");
          return super.prefillPart(tokens, from, to, logits, sampler);
        }
      };
    }
  }
}
