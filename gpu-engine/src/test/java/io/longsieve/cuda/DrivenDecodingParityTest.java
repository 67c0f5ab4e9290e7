package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.DenseReference;
import io.longsieve.engine.Engine;
import io.longsieve.engine.Fidelity;
import io.longsieve.engine.FidelityMeter;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The engine's driven (teacher-forced) decoding, {@link Engine#drive}, on the CUDA backend against the
 * CPU reference, through the public engine API as eval-engine and the shadow audit use it: the bundled
 * needle model, a 300-token haystack prompt, the CPU's dense greedy continuation fed to both backends;
 * every step's logits agree within the dense forward's bf16 tolerance (ForwardParityTest,
 * PolicyEngineParityTest) for dense and for a policy whose attended keys are fixed by position; the GPU's
 * dense run measured against itself has no KL; recall and the oracle are refused in one line.
 */
@Tag("gpu")
class DrivenDecodingParityTest {

  static final Path MODEL = Path.of("..", "models", "longsieve-needle-7m");
  static final int PROMPT = 300;
  static final int STEPS = 12;
  static final double POSITIONAL_TOLERANCE = 0.1; // PolicyEngineParityTest's, for attended sets fixed by position

  static Engine cpu;
  static Engine gpu;
  static GenerationRequest request;
  static DenseReference reference;

  @BeforeAll
  static void open() throws Exception {
    cpu = Backends.open(EngineSpec.of(MODEL).withDevice("cpu").withThreads(2).withPrefillChunk(4096));
    gpu = Backends.open(EngineSpec.of(MODEL).withDevice("cuda"));
    String text = Files.readString(Path.of("..", "examples", "docs.jsonl"));
    int[] ids = Arrays.copyOf(cpu.model().tokenizer().encode(text, false), PROMPT);
    request = GenerationRequest.raw("p", "", STEPS).withPromptIds(ids);
    reference = FidelityMeter.reference(cpu, request);
  }

  @AfterAll
  static void close() {
    if (gpu != null) gpu.close();
    if (cpu != null) cpu.close();
  }

  static List<float[]> forced(Engine e, String policy) {
    List<float[]> out = new ArrayList<>();
    e.drive(request.withPolicy(PolicySpec.parse(policy)).withMaxNewTokens(reference.steps()), (step, logits) -> {
      out.add(logits.clone());
      return step + 1 < reference.steps() ? reference.tokens()[step] : -1;
    }, null);
    return out;
  }

  @Test
  void teacherForcedLogitsFollowTheCpu() {
    assertTrue(reference.steps() >= 2, "steps " + reference.steps());
    for (String policy : new String[] {"dense", "streaming:sinks=4,recent=64"}) {
      List<float[]> c = forced(cpu, policy), g = forced(gpu, policy);
      assertEquals(c.size(), g.size(), policy);
      StringBuilder errors = new StringBuilder();
      for (int s = 0; s < c.size(); s++) {
        double err = Gpu.relErr(g.get(s), c.get(s));
        errors.append(String.format(" %.4f", err));
        assertTrue(err <= POSITIONAL_TOLERANCE, policy + ": step " + s + " logits off by " + err + " (so far:" + errors + ")");
      }
      System.out.printf("%s: relative teacher-forced logit error per step%s%n", policy, errors);
    }
  }

  @Test
  void theGpuMeasuresItsOwnDenseRunAsExactAndRefusesWhatItCannotMeasure() {
    DenseReference own = FidelityMeter.reference(gpu, request);
    Fidelity f = FidelityMeter.measure(gpu, request, PolicySpec.DENSE, own, 0);
    assertTrue(f.klMean() <= 1e-6, "kl " + f.klMean());
    assertEquals(1.0, f.top1Agreement());
    UnsupportedOperationException recall = assertThrows(UnsupportedOperationException.class,
        () -> FidelityMeter.measure(gpu, request, PolicySpec.DENSE, own, 2));
    assertFalse(recall.getMessage().contains("\n"), recall.getMessage());
    IllegalArgumentException oracle = assertThrows(IllegalArgumentException.class,
        () -> FidelityMeter.measure(gpu, request, PolicySpec.parse("oracle:frac=0.1"), own, 0));
    assertTrue(oracle.getMessage().contains("does not run prefill policy 'oracle'"), oracle.getMessage());
  }
}
