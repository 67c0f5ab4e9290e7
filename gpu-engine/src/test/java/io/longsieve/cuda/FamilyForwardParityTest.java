package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.CpuRunner;
import io.longsieve.engine.Goldens;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.model.Checkpoint;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The CUDA forward pass of the families of issue 34 against the CPU backend and the transformers
 * goldens, as ForwardParityTest does for the Llama family: qwen3-yarn (q/k norm kernel, YaRN table
 * with its factor folded into the norm weights), phi3-longrope (fused weights, partial rotary in the
 * device layout, LongRoPE tables switched per call and the recompute past the window), gemma3-text
 * (per-layer windows and tables, sandwich norms, GeGLU, embedding scale, soft-capping, head_dim 32),
 * llama-dynamic (a table per decode step) and mistral-nemo (head_dim 16 with hidden 32). Prefill and
 * decode logits within ForwardParityTest's bf16 tolerance of the CPU's; greedy tokens equal to
 * transformers' wherever the margin is wider than twice the GPU's logit error. Decode steps run
 * through decodeNext: the captured dense step (CUDA graphs) where the model allows it.
 *
 * <p>The test's power: every case compares at least 3 greedy steps and every model at least 20 over its
 * cases. A per-case floor of 10 was too strict for gemma3-text/long: its bf16 logits are further from fp32
 * than the other families' (transformers' own bf16 forward: relative error 0.057, max 0.31 against its fp32
 * forward on that case; this engine's GPU 0.043 against the CPU), so the margin rule keeps only 6 of its 40
 * steps (its chat case 4), while its short case keeps 23.
 */
@Tag("gpu")
class FamilyForwardParityTest {

  @ParameterizedTest(name = "{0}, maxBatch {1}")
  @CsvSource({"qwen3-yarn, 8", "phi3-longrope, 8", "gemma3-text, 8", "llama-dynamic, 8", "mistral-nemo, 8",
      "gemma3-text, 1"})
  void logitsAndGreedyTokensMatch(String name, int maxBatch) throws Exception {
    Path dir = Goldens.MODELS.resolve(name);
    Goldens goldens = Goldens.read(dir);
    try (LoadedModel model = LoadedModel.load(dir);
         Checkpoint ck = Checkpoint.open(dir);
         CpuRunner cpu = new CpuRunner(model.config(), ck, 2, 16);
         ModelRunner gpu = CudaRunner.open(EngineSpec.of(dir).withDevice("cuda").withMaxBatch(maxBatch), model)) {
      int vocab = model.config().vocabSize();
      int comparedInModel = 0;
      for (Goldens.Case c : goldens.cases()) {
        String where = name + "/" + c.id() + " (maxBatch " + maxBatch + ")";
        int[] ids = c.inputIds();
        int steps = c.greedyIds().length;
        float[] gl = new float[vocab], cl = new float[vocab];
        try (ModelRunner.Sequence gs = gpu.open(ids.length + steps, PolicySpec.DENSE);
             ModelRunner.Sequence cs = cpu.open(ids.length + steps, PolicySpec.DENSE)) {
          gs.prefill(ids, gl);
          cs.prefill(ids, cl);
          double err = Gpu.relErr(gl, cl);
          System.out.printf("%s: prefill logits relative error vs cpu %.4f, vs transformers %.4f%n", where, err,
              Gpu.relErr(gl, c.logitsLast()));
          assertTrue(err <= ForwardParityTest.LOGIT_TOLERANCE, where + ": prefill logits vs cpu off by " + err);
          double maxAbs = 0;
          for (int i = 0; i < vocab; i++) maxAbs = Math.max(maxAbs, Math.abs(gl[i] - cl[i]));
          float tie = (float) (2 * maxAbs);
          Sampler greedy = new Sampler(SamplingParams.GREEDY, vocab);
          int token = Sampler.argmax(gl, vocab), compared = 0;
          for (int s = 0; s < steps; s++) {
            if (c.greedyMargins()[s] >= tie) {
              assertEquals(c.greedyIds()[s], token, where + ": greedy token " + s + " (margin " + c.greedyMargins()[s] + ")");
              compared++;
            }
            if (s + 1 == steps) break;
            if (s % 8 == 0) {  // now and then through decode, with the logits read back and held to the CPU's
              gs.decode(c.greedyIds()[s], ids.length + s, gl);
              cs.decode(c.greedyIds()[s], ids.length + s, cl);
              double derr = Gpu.relErr(gl, cl);
              assertTrue(derr <= ForwardParityTest.LOGIT_TOLERANCE, where + ": decode logits at step " + s + " off by " + derr);
              token = Sampler.argmax(gl, vocab);
            } else {
              cs.decode(c.greedyIds()[s], ids.length + s, cl);  // the CPU follows, for the next read-back
              token = gs.decodeNext(c.greedyIds()[s], ids.length + s, gl, greedy);
            }
          }
          System.out.printf("%s: greedy tokens equal on %d of %d steps (the rest have margins < %.3f)%n", where,
              compared, steps, tie);
          assertTrue(compared >= 3, where + ": only " + compared + " steps had a margin above " + tie);
          comparedInModel += compared;
        }
      }
      assertTrue(comparedInModel >= 20, name + ": only " + comparedInModel + " greedy steps compared over its cases");
    }
  }
}
