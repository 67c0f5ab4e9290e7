package io.longsieve.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.policy.PolicySpec;
import io.longsieve.structured.OutputSchema;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Prefix reuse beside the engine's other features (docs/prefix-reuse.md, "Other features with a shared
 * prefix"), on the CPU: rows held to a JSON schema share a kept prefix with free rows; on a model whose
 * RoPE table follows the prompt's length (LongRoPE, dynamic NTK) rows share a prefix only with rows whose
 * prompt selects the same table, and a LongRoPE fork that decodes past the original window is recomputed
 * as it is alone. Every row gives, token for token, what it gives alone (greedy).
 */
class PrefixReuseCombinationsTest {

  static final String SMALL = "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":99},\"maxItems\":4}";

  @Test
  void constrainedAndFreeRowsShareOnePrefix() throws Exception {
    int[] d = PrefixReuseTest.doc(21);
    OutputSchema schema = OutputSchema.parse(SMALL);
    List<GenerationRequest> rows = new ArrayList<>();
    for (int q = 0; q < 4; q++) {
      GenerationRequest r = PrefixReuseTest.row("q" + q, d, q, "dense");
      rows.add(q % 2 == 1 ? r.withJsonSchema(schema).withMaxNewTokens(24) : r); // the first computes the prefix
    }
    try (Engine alone = Backends.open(PrefixReuseTest.spec());
         BatchingEngine engine = PrefixReuseTest.reusing(EngineSpec.PREFIX_CACHE_DEFAULT)) {
      // rows 1-3 wait for row 0's prefix, then decode batched, masked and free rows together
      List<Future<GenerationResult>> got = PrefixReuseTest.concurrentlyOn(engine, rows, PrefixReuseTest.shared());
      for (int q = 0; q < rows.size(); q++) {
        GenerationResult r = got.get(q).get();
        PrefixReuseTest.assertSame(alone.generate(rows.get(q)), r);
        assertEquals(q == 0 ? 0 : PrefixReuseTest.DOC, r.stats().prefixTokensReused(), r.id());
      }
      assertEquals(3, engine.prefixCounters().forks(), engine.prefixCounters().toString());
    }
  }

  static final int DOC = 40;       // document tokens, each row's shared part
  static final int NEW = 24;       // the short prompts decode past position 64, LongRoPE's original window
  static final int[] QUESTION = {9, 13, 30, 35, 35}; // prompts of 49, 53 (within 64), 70, 75 and 75 tokens

  /**
   * LongRoPE: 49 and 53 share the short table, 70 and 75 the long one. Dynamic NTK (max_position_embeddings
   * 64): 49 and 53 the config's table, 70 and 75 each a table of its own length, so only the second 75 reuses.
   */
  @ParameterizedTest
  @CsvSource({"phi3-longrope, 0 40 0 40 40", "llama-dynamic, 0 40 0 0 40"})
  void aLengthDependentRopeSharesAPrefixWithinOneTable(String name, String expected) {
    Path dir = Goldens.MODELS.resolve(name);
    EngineSpec spec = EngineSpec.of(dir).withDevice("cpu").withThreads(2).withPrefillChunk(16);
    Random random = new Random(7);
    int[] doc = random.ints(DOC, 10, 1000).toArray();
    int[] reused = new int[QUESTION.length];
    try (Engine alone = Backends.open(spec);
         BatchingEngine engine = (BatchingEngine) Backends.open(spec.withPrefixCacheBytes(EngineSpec.PREFIX_CACHE_DEFAULT))) {
      for (int q = 0; q < QUESTION.length; q++) {
        int[] ids = Arrays.copyOf(doc, DOC + QUESTION[q]);
        for (int i = DOC; i < ids.length; i++) ids[i] = 10 + random.nextInt(990);
        GenerationRequest r = GenerationRequest.raw("q" + q, "", NEW).withPromptIds(ids).withMinNewTokens(NEW)
            .withPolicy(PolicySpec.DENSE);
        GenerationResult got = engine.generate(r, new SharedPrefix(DOC, "test"));
        GenerationResult own = alone.generate(r);
        PrefixReuseTest.assertSame(own, got);
        assertEquals(NEW, got.tokenIds().length, got.id());
        reused[q] = got.stats().prefixTokensReused();
      }
      assertArrayEquals(Arrays.stream(expected.split(" ")).mapToInt(Integer::parseInt).toArray(), reused, name);
      assertTrue(engine.prefixCounters().kept() >= 2, engine.prefixCounters().toString());
    }
  }
}
