package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.CpuRunner;
import io.longsieve.cuda.CudaRunner;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.model.Checkpoint;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.TsaSelections;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * One TSA on both backends: the CPU backend (engine chunk 512) and the CUDA backend (engine chunk
 * at least 4096) prefill the same 1000-token prompt of the trained needle model with the same
 * {@code tsa:chunk}, and make the same selections: the same sparse layers at the same chunk starts
 * (one selection per chunk of the policy, not of either engine), and per query head lists of
 * (nearly) the same length and content. Not exactly the same: the GPU's bf16 activations move the
 * proxy masses by ~1e-2 relative after a few layers, so tokens near the cut-off (keep count) or
 * with near-tied masses (top-keep) may swap; the bounds below allow that much (KEEP_SLACK, OVERLAP)
 * and no more, and the figures are printed.
 */
@Tag("gpu")
class TsaScopeParityTest {

  static final int PROMPT = 1000;
  /** Keep counts may differ by this share (tau's cut-off sits among many low-mass tokens). */
  static final double KEEP_SLACK = 0.03;
  /** Least overlap |cpu ∩ gpu| / max(|cpu|, |gpu|) of one head's list. */
  static final double OVERLAP = 0.95;

  @ParameterizedTest(name = "chunk={0}")
  @ValueSource(ints = {384, 0})
  void cpuAndGpuSelectTheSameTokens(int chunk) {
    String policy = "tsa:tau=0.05,min=64,window=32,layers=all,chunk=" + chunk;
    try (LoadedModel model = LoadedModel.load(PolicyEngineParityTest.MODEL)) {
      int[] prompt = promptOf(model);
      List<TsaSelections.Selection> cpu = new ArrayList<>(), gpu = new ArrayList<>();
      float[] logits = new float[model.config().vocabSize()];
      try (Checkpoint ck = Checkpoint.open(PolicyEngineParityTest.MODEL);
           CpuRunner c = new CpuRunner(model.config(), ck, 2, 512, PolicyEngineParityTest.MODEL)) {
        run(c, policy, prompt, logits, cpu);
      }
      try (ModelRunner g = CudaRunner.open(EngineSpec.of(PolicyEngineParityTest.MODEL).withDevice("cuda"), model)) {
        run(g, policy, prompt, logits, gpu);
      }
      assertEquals(cpu.size(), gpu.size(), policy + ": sparse selections");
      assertTrue(cpu.size() >= model.config().numLayers(), policy + ": some layers are sparse");
      double worst = 1;
      for (int i = 0; i < cpu.size(); i++) {
        TsaSelections.Selection a = cpu.get(i), b = gpu.get(i);
        String what = policy + ": layer " + a.layer() + " chunk at " + a.chunkPos0();
        assertEquals(a.layer(), b.layer(), what);
        assertEquals(a.chunkPos0(), b.chunkPos0(), what + ": chunk start");
        assertEquals(chunk == 0 ? 0 : a.chunkPos0() / chunk * chunk, a.chunkPos0(), what + ": a chunk of the policy");
        for (int h = 0; h < a.positions().length; h++) {
          int[] x = a.positions()[h], y = b.positions()[h];
          assertTrue(Math.abs(x.length - y.length) <= KEEP_SLACK * x.length + 1, what + " head " + h + ": lists of "
              + x.length + " / " + y.length);
          double o = overlap(x, y);
          worst = Math.min(worst, o);
          assertTrue(o >= OVERLAP, what + " head " + h + ": overlap " + o);
        }
      }
      System.out.printf("%s: %d selections, worst per-head overlap %.4f%n", policy, cpu.size(), worst);
    }
  }

  private static void run(ModelRunner r, String policy, int[] prompt, float[] logits,
                          List<TsaSelections.Selection> into) {
    TsaSelections.record(into::add);
    try (ModelRunner.Sequence s = r.open(PROMPT + 1, PolicySpec.parse(policy))) {
      s.prefill(prompt, logits);
    } finally {
      TsaSelections.record(null);
    }
  }

  static int[] promptOf(LoadedModel model) {
    try {
      String text = java.nio.file.Files.readString(PolicyEngineParityTest.TEXT);
      return Arrays.copyOf(model.tokenizer().encode(text, false), PROMPT);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** |a ∩ b| / max(|a|, |b|) of two ascending position lists. */
  static double overlap(int[] a, int[] b) {
    int i = 0, j = 0, same = 0;
    while (i < a.length && j < b.length) {
      if (a[i] == b[j]) {
        same++;
        i++;
        j++;
      } else if (a[i] < b[j]) {
        i++;
      } else {
        j++;
      }
    }
    return (double) same / Math.max(1, Math.max(a.length, b.length));
  }
}
