package io.longsieve.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.RequestLimits;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.model.Checkpoint;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.TsaSelections;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * TSA's selection scope is its own {@code chunk} parameter, not the engine's prefill chunk: on a
 * tiny model (random weights, 4 layers) the CPU backend's selections (every sparse layer and chunk,
 * per head, TsaSelections) and logits are the same whatever the engine's chunk, through one
 * prefill call or the scheduler's prefill parts, and with a smaller chunk a retry asks for
 * (RequestLimits); a different TSA chunk selects differently; chunk=0 selects once over the whole
 * prompt; a chunk whose activations pass the CPU's limit is refused at open.
 */
class TsaChunkScopeTest {

  static final Path MODEL = Path.of("src/test/resources/models/llama-gqa");
  static final String TSA = "tsa:tau=0.2,min=32,window=16,layers=all,chunk=";
  static final int PROMPT = 600;

  static LoadedModel model;
  static CpuRunner small, large;  // engine prefill chunks 64 and 700
  static int[] prompt;

  @BeforeAll
  static void open() {
    model = LoadedModel.load(MODEL);
    try (Checkpoint ck = Checkpoint.open(MODEL)) {
      small = new CpuRunner(model.config(), ck, 2, 64);
    }
    try (Checkpoint ck = Checkpoint.open(MODEL)) {
      large = new CpuRunner(model.config(), ck, 2, 700);
    }
    Random r = new Random(5);
    prompt = new int[PROMPT];
    for (int i = 0; i < PROMPT; i++) prompt[i] = r.nextInt(model.config().vocabSize() - 8);
  }

  @AfterAll
  static void close() {
    small.close();
    large.close();
    model.close();
  }

  /** The selections and last-position logits of one prefill. */
  record Run(List<TsaSelections.Selection> selections, float[] logits) {}

  static Run prefill(CpuRunner runner, String policy, boolean inParts) {
    List<TsaSelections.Selection> got = new ArrayList<>();
    float[] logits = new float[model.config().vocabSize()];
    TsaSelections.record(got::add);
    try (ModelRunner.Sequence s = runner.open(PROMPT + 1, PolicySpec.parse(policy))) {
      if (!inParts) {
        s.prefill(prompt, logits);
      } else {  // as GenerationTask cuts it for the batching scheduler
        Sampler sampler = new Sampler(SamplingParams.GREEDY, model.config().vocabSize());
        for (int from = 0; from < PROMPT; ) {
          int to = (int) Math.min(PROMPT, (long) from + s.prefillPartTokens());
          s.prefillPart(prompt, from, to, logits, sampler);
          from = to;
        }
      }
    } finally {
      TsaSelections.record(null);
    }
    return new Run(got, logits);
  }

  static void assertSame(Run want, Run got, String what) {
    assertEquals(want.selections().size(), got.selections().size(), what + ": sparse selections");
    for (int i = 0; i < want.selections().size(); i++) {
      TsaSelections.Selection a = want.selections().get(i), b = got.selections().get(i);
      assertEquals(a.layer(), b.layer(), what);
      assertEquals(a.chunkPos0(), b.chunkPos0(), what + ": chunk start");
      for (int h = 0; h < a.positions().length; h++) {
        assertArrayEquals(a.positions()[h], b.positions()[h], what + ": layer " + a.layer() + " head " + h);
      }
    }
    assertArrayEquals(want.logits(), got.logits(), what + ": logits");
  }

  @Test
  void selectionsDoNotDependOnTheEnginesChunk() {
    Run base = prefill(small, TSA + 256, false);
    // chunks start at 0, 256 and 512 (not at the engine's 64-token steps), each selecting on every layer
    java.util.Set<Integer> starts = new java.util.TreeSet<>();
    for (TsaSelections.Selection s : base.selections()) starts.add(s.chunkPos0());
    assertEquals(java.util.Set.of(0, 256, 512), starts);
    assertEquals(3 * model.config().numLayers(), base.selections().size());
    assertSame(base, prefill(large, TSA + 256, false), "engine chunk 700 vs 64");
    assertSame(base, prefill(small, TSA + 256, true), "prefill parts");
    assertSame(base, prefill(large, TSA + 256, true), "prefill parts, engine chunk 700");
    assertSame(base, RequestLimits.of(0, 32).with(() -> prefill(large, TSA + 256, false)), "a retry's chunk of 32");
  }

  @Test
  void theChunkParameterIsTheScope() {
    Run a = prefill(small, TSA + 256, false), b = prefill(small, TSA + 128, false);
    assertNotEquals(a.selections().size(), b.selections().size(), "128-token chunks select more often");
    Run whole = prefill(small, TSA + 0, false);
    assertEquals(model.config().numLayers(), whole.selections().size(), "one selection per layer");
    for (TsaSelections.Selection s : whole.selections()) {
      assertEquals(0, s.chunkPos0());
      int[] head0 = s.positions()[0];
      assertEquals(PROMPT - 1, head0[head0.length - 1], "the proxy window ends the prompt");
    }
    assertSame(whole, prefill(large, TSA + 0, true), "whole prompt, in parts, other engine chunk");
    assertSame(whole, prefill(small, TSA + PROMPT, false), "a chunk as long as the prompt");
  }

  @Test
  void aChunkPastTheActivationLimitIsRefusedAtOpen() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> small.open(PROMPT, PolicySpec.parse(TSA + 16_000_000)));  // 16M rows x 2.8 KB
    assertTrue(e.getMessage().contains("activations") && e.getMessage().contains("tsa:chunk"), e.getMessage());
  }
}
