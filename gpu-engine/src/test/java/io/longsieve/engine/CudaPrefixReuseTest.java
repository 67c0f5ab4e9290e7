package io.longsieve.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.cuda.CudaRunner;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.api.Test;

/**
 * Prefix reuse on the CUDA backend: rows over one document forked from its kept pages (shared by
 * reference in the engine's page pool) give, token for token, what each gives alone on an engine
 * without reuse (private pools), under every policy the GPU runs; rows that arrive while the prefix
 * is computed wait and fork. The GPU cuts a prefix at whole prefill chunks
 * ({@link CudaRunner#prefillChunk}: 4096 tokens at least; TSA at its own chunk), so the document is
 * longer than one; the bundled needle model has the positions for it (32768) and a head size the
 * GPU's TSA takes (64). CudaPrefixReuseSizesTest checks these sizes on the CPU.
 */
@Tag("gpu")
class CudaPrefixReuseTest {

  static final Path MODEL = Path.of("..", "models", "longsieve-needle-7m");
  static final int REUSED = CudaRunner.prefillChunk(EngineSpec.of(MODEL)); // what a row after the first reuses
  static final int DOC = REUSED + 104;
  static final int[] QUESTION = {9, 5, 13, 8};
  static final int NEW_TOKENS = 12;
  static final String[] POLICIES = {
      "dense",
      "tokenselect:sinks=4,k=64,window=32,chunk=64",           // Selection Cache off (the default)
      "tokenselect:sinks=4,k=64,window=32,chunk=64,cache=on",
      "tokenselect:sinks=4,k=64,window=32,chunk=64,cache=on,threshold=-1",
      "tsa:tau=0.05,min=16,window=8,layers=all,chunk=512",  // its own chunk: 8 of them are the 4096 reused
      "snapkv:window=8,capacity=256",
      "selkv:ratio=0.3,window=8",
      "streaming:sinks=4,recent=256",
      "dense + none + quest:page=8,budget=64,dense_layers=1"};
  static Engine alone;

  @BeforeAll
  static void open() {
    alone = Backends.open(EngineSpec.of(MODEL).withDevice("cuda"));
  }

  @AfterAll
  static void close() {
    alone.close();
  }

  static GenerationRequest row(String id, int seed, int q, String policy) {
    Random r = new Random(seed);
    int[] ids = new int[DOC + QUESTION[q % QUESTION.length]];
    for (int i = 0; i < DOC; i++) ids[i] = 10 + r.nextInt(1000);
    Random qr = new Random(1000 + q);
    for (int i = DOC; i < ids.length; i++) ids[i] = 10 + qr.nextInt(1000);
    return GenerationRequest.raw(id, "", NEW_TOKENS).withPromptIds(ids).withMinNewTokens(NEW_TOKENS)
        .withPolicy(PolicySpec.parse(policy));
  }

  static BatchingEngine reusing() {
    return (BatchingEngine) Backends.open(EngineSpec.of(MODEL).withDevice("cuda")
        .withPrefixCacheBytes(EngineSpec.PREFIX_CACHE_DEFAULT));
  }

  static Stream<String> policies() {
    return Stream.of(POLICIES);
  }

  @ParameterizedTest
  @MethodSource("policies")
  void everyRowGivesWhatItGivesAlone(String policy) {
    try (BatchingEngine engine = reusing()) {
      assertEquals("cuda", engine.backend());
      for (int q = 0; q < 4; q++) {
        GenerationRequest r = row("q" + q, 1, q, policy);
        GenerationResult got = engine.generate(r, new SharedPrefix(DOC, "t"));
        GenerationResult ref = alone.generate(r);
        assertArrayEquals(ref.tokenIds(), got.tokenIds(), "row " + q + " under " + policy);
        assertEquals(q == 0 ? 0 : REUSED, got.stats().prefixTokensReused(), "row " + q + " under " + policy);
      }
      assertEquals(3, engine.prefixCounters().forks(), engine.prefixCounters().toString());
    }
  }

  @Test
  void anEvictedPrefixIsComputedAgain() {
    long onePrefix;
    try (BatchingEngine probe = reusing()) {
      probe.generate(row("p", 9, 0, "dense"), new SharedPrefix(DOC, "t"));
      onePrefix = probe.prefixCounters().heldBytes();
    }
    try (BatchingEngine engine = (BatchingEngine) Backends.open(EngineSpec.of(MODEL).withDevice("cuda")
        .withPrefixCacheBytes(onePrefix * 3 / 2))) {
      int[] seeds = {3, 3, 4, 4, 3};
      int[] expected = {0, REUSED, 0, REUSED, 0}; // the third document-3 row computes it again
      for (int i = 0; i < seeds.length; i++) {
        GenerationRequest r = row("r" + i, seeds[i], i, "dense");
        GenerationResult got = engine.generate(r, new SharedPrefix(DOC, "t"));
        assertArrayEquals(alone.generate(r).tokenIds(), got.tokenIds(), "row " + i);
        assertEquals(expected[i], got.stats().prefixTokensReused(), "row " + i);
      }
      assertEquals(2, engine.prefixCounters().evicted(), engine.prefixCounters().toString());
      assertTrue(engine.prefixCounters().peakBytes() <= onePrefix * 3 / 2);
    }
  }

  @Test
  void aRowThatFailsBeforeKeepingThePrefixHandsItToTheNext() throws Exception {
    List<GenerationRequest> rows = new ArrayList<>();
    for (int q = 0; q < 3; q++) rows.add(row("q" + q, 5, q, "snapkv:window=8,capacity=256"));
    try (BatchingEngine engine = reusing()) {
      // the first row's deadline has passed when its prefill starts: it fails, the second computes the prefix
      List<Future<GenerationResult>> got = PrefixReuseTest.concurrentlyOn(engine, rows, new SharedPrefix(DOC, "t"), 0,
          io.longsieve.engine.spi.RequestLimits.of(1, 0));
      assertThrows(java.util.concurrent.ExecutionException.class, () -> got.get(0).get());
      for (int q = 1; q < 3; q++) assertArrayEquals(alone.generate(rows.get(q)).tokenIds(), got.get(q).get().tokenIds());
      assertEquals(0, got.get(1).get().stats().prefixTokensReused());
      assertEquals(REUSED, got.get(2).get().stats().prefixTokensReused());
    }
  }

  @Test
  void rowsThatArriveWhileThePrefixIsComputedWaitForIt() throws Exception {
    List<GenerationRequest> rows = new ArrayList<>();
    for (int q = 0; q < 4; q++) rows.add(row("q" + q, 2, q, "tokenselect:sinks=4,k=64,window=32,chunk=64,cache=on"));
    try (BatchingEngine engine = reusing()) {
      List<Future<GenerationResult>> got = PrefixReuseTest.concurrentlyOn(engine, rows, new SharedPrefix(DOC, "t"));
      for (int q = 0; q < rows.size(); q++) {
        assertArrayEquals(alone.generate(rows.get(q)).tokenIds(), got.get(q).get().tokenIds(), "row " + q);
      }
      assertEquals(1, engine.prefixCounters().kept());
      assertEquals(3, engine.prefixCounters().forks());
      assertTrue(engine.prefixCounters().peakBytes() > 0);
    }
  }
}
