package io.longsieve.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Path;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Batched CPU decode ({@link CpuModel#decodeBatch} through {@link CpuRunner#decodeBatch}) against
 * single-row decodes: B sequences with their own prompts, lengths and policies, several steps.
 */
class BatchedDecodeTest {

  static final Path MODELS = Path.of("src/test/resources/models");
  static final String[] POLICIES = {"dense", "streaming:sinks=4,recent=16", "selkv:ratio=0.5", "dense",
      "quest:budget=16,page=4,dense_layers=1"};

  @ParameterizedTest(name = "{0}, B={1}, chunk={2}")
  @CsvSource({"llama-gqa, 5, 16", "llama-gqa, 7, 3", "qwen2-bias, 4, 16", "llama-tied, 1, 8"})
  void batchedRowsEqualSingleRowDecodes(String name, int b, int chunk) {
    Path dir = MODELS.resolve(name);
    try (Checkpoint ck = Checkpoint.open(dir)) {
      ModelConfig c = ModelConfig.read(dir);
      try (CpuRunner runner = new CpuRunner(c, ck, 2, chunk)) {
        int vocab = c.vocabSize(), steps = 6;
        SplittableRandom rnd = new SplittableRandom(b * 31L + chunk);
        ModelRunner.Sequence[] batched = new ModelRunner.Sequence[b], single = new ModelRunner.Sequence[b];
        int[] tokens = new int[b], positions = new int[b], next = new int[b];
        float[][] logits = new float[b][vocab];
        Sampler[] samplers = new Sampler[b];
        for (int i = 0; i < b; i++) {
          int[] prompt = new int[5 + 11 * i];
          for (int j = 0; j < prompt.length; j++) prompt[j] = rnd.nextInt(vocab);
          String policy = POLICIES[i % POLICIES.length];
          batched[i] = runner.open(prompt.length + steps, PolicySpec.parse(policy));
          single[i] = runner.open(prompt.length + steps, PolicySpec.parse(policy));
          batched[i].prefill(prompt, logits[i]);
          single[i].prefill(prompt, new float[vocab]);
          tokens[i] = rnd.nextInt(vocab);
          positions[i] = prompt.length;
          samplers[i] = new Sampler(SamplingParams.GREEDY, vocab);
        }
        float[] alone = new float[vocab];
        for (int s = 0; s < steps; s++) {
          runner.decodeBatch(batched, tokens, positions, logits, samplers, next, b);
          for (int i = 0; i < b; i++) {
            single[i].decode(tokens[i], positions[i], alone);
            assertTrue(relativeError(alone, logits[i]) <= 1e-5, "row " + i + " step " + s);
            assertArrayEquals(alone, logits[i], "row " + i + " step " + s + ": the same dot products, bit for bit");
            tokens[i] = Sampler.argmax(alone, vocab);
            assertTrue(next[i] == tokens[i], "row " + i + " step " + s + ": the batch's pick");
            positions[i]++;
          }
        }
        for (int i = 0; i < b; i++) {
          assertTrue(batched[i].kvBytes() == single[i].kvBytes());
          batched[i].close();
          single[i].close();
        }
      }
    }
  }

  static double relativeError(float[] want, float[] got) {
    double num = 0, den = 0;
    for (int i = 0; i < want.length; i++) {
      num += (double) (want[i] - got[i]) * (want[i] - got[i]);
      den += (double) want[i] * want[i];
    }
    return Math.sqrt(num / Math.max(den, 1e-30));
  }
}
