package io.longsieve.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.CpuRunner;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.model.Checkpoint;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import org.junit.jupiter.api.Test;

/**
 * attention_ms and selection_ms mean the same on both backends: the prefill's attention (selection
 * excluded) and its selection, never the decode steps (the CUDA backend cannot time those per step,
 * so the CPU's decode attention, which it can time, must not count either).
 */
class AttentionTimingTest {

  /** What each decode step adds to a sequence's attention and selection clocks in {@link #decodeStepsNeverReachTheStats}. */
  static final double DECODE_STEP_MS = 1000;

  @Test
  void decodeStepsNeverReachTheStats() throws Exception {
    LoadedModel model = LoadedModel.load(BatchingEngineTest.MODEL);
    ModelRunner cpu;
    try (Checkpoint ck = Checkpoint.open(BatchingEngineTest.MODEL)) {
      cpu = new CpuRunner(model.config(), ck, 1, 512, BatchingEngineTest.MODEL);
    }
    try (Engine engine = new BatchingEngine(model, new SlowDecodeRunner(cpu), 2048, PolicySpec.DENSE, 1, 0)) {
      GenerationStats s = engine.generate(GenerationRequest.raw("d", BatchingEngineTest.words(40, 1), 8)
          .withMinNewTokens(8)).stats();
      assertEquals(8, s.outputTokens());
      // eight decode steps would have added 8 s to each had the engine read them after decoding
      assertTrue(s.attentionMs() < DECODE_STEP_MS && s.policyStats().selectionMs() < DECODE_STEP_MS, s.toString());
      assertTrue(s.attentionMs() > 0 && s.attentionMs() <= s.prefillMs(), s.toString());
    }
  }

  @Test
  void tsaSelectionIsPartOfThePrefillsAttentionAndNotCountedTwice() throws Exception {
    // small min and window so the tiny model's 300-token prompt takes TSA's sparse path on layers 1-3
    PolicySpec tsa = PolicySpec.parse("tsa:min=16,window=16,layers=1-3,keep=0.5");
    try (Engine engine = io.longsieve.bootstrap.Backends.open(io.longsieve.engine.spi.EngineSpec
        .of(BatchingEngineTest.MODEL).withDevice("cpu").withThreads(1).withDefaultPolicy(tsa))) {
      GenerationStats s = engine.generate(GenerationRequest.raw("t", BatchingEngineTest.words(300, 2), 4)).stats();
      assertTrue(s.policyStats().sparseLayers() > 0, s.toString());
      assertTrue(s.policyStats().selectionMs() > 0, s.toString());
      assertTrue(s.attentionMs() + s.policyStats().selectionMs() <= s.prefillMs(), "both inside the prefill: " + s);
    }
  }

  /**
   * The CPU runner, with sequences whose attention and selection clocks jump by {@link #DECODE_STEP_MS}
   * per decode step (decode steps take the default one-after-the-other path).
   */
  private static final class SlowDecodeRunner extends DelegatingRunner {
    SlowDecodeRunner(ModelRunner inner) {
      super(inner);
    }

    @Override
    public Sequence open(int capacity, PolicySpec policy) {
      return new DelegatingSequence(inner.open(capacity, policy)) {
        int steps;

        @Override
        public void decode(int token, int pos, float[] logits) {
          steps++;
          super.decode(token, pos, logits);
        }

        @Override
        public int decodeNext(int token, int pos, float[] logits, Sampler sampler) {
          steps++;
          return super.decodeNext(token, pos, logits, sampler);
        }

        @Override
        public double attentionMs() {
          return super.attentionMs() + steps * DECODE_STEP_MS;
        }

        @Override
        public PolicyStats policyStats() {
          PolicyStats p = super.policyStats();
          return new PolicyStats(p.attendedTokensMean(), p.selectedFractionByLayer(), p.selectionCacheHitRate(),
              p.kvBytesAfter(), p.sparseLayers(), p.selectionMs() + steps * DECODE_STEP_MS);
        }
      };
    }
  }
}
