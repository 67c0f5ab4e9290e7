package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.longsieve.cpu.CpuRunner;
import io.longsieve.engine.Goldens;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The CUDA forward pass on the FP8 checkpoints (tools/make_fp8_checkpoints.py) against the CPU's
 * fp32 dequantized reference. On an H100/H200 the weights stay FP8: prefill quantizes activations as
 * each checkpoint says and runs the FP8 GEMM, decode runs the FP8-weight GEMV. Tolerance 0.35 relative on
 * the logits: FP8 activations alone (everything else fp32, tools/fp8_activation_noise.py) move these tiny
 * models' logits by 0.09-0.24 against the fp32-activation reference (ct-block128/long the most), and the
 * GPU's bf16 path adds its own (ForwardParityTest: up to about 0.05 on these shapes); the first H100 run
 * measured 0.07-0.29. (An earlier guess of 0.2 did not count that the hidden sizes of 64 and 128 average
 * little of the rounding away.) Greedy tokens equal wherever the CPU's top-1/top-2 margin is wider than
 * twice the largest logit error. The kernels themselves are held to their CPU twins, quantization
 * included, at much tighter tolerances in Fp8ParityTest.
 */
@Tag("gpu")
class Fp8ForwardParityTest {

  static final double FP8_LOGIT_TOLERANCE = 0.35;

  @ParameterizedTest
  @ValueSource(strings = {"fp8-block128", "fp8-tensor", "ct-channel", "ct-tensor", "ct-block128"})
  void logitsAndGreedyTokensFollowTheDequantizedCpuReference(String name) throws Exception {
    Path dir = Goldens.MODELS.resolve(name);
    Goldens goldens = Goldens.read(dir);
    try (LoadedModel model = LoadedModel.load(dir);
         Checkpoint ck = Checkpoint.open(dir);
         CpuRunner cpu = new CpuRunner(model.config(), ck, 2, 16);
         CudaRunner gpu = (CudaRunner) CudaRunner.open(EngineSpec.of(dir).withDevice("cuda").withMaxBatch(8), model)) {
      int vocab = model.config().vocabSize();
      for (Goldens.Case c : goldens.cases()) {
        String where = name + "/" + c.id();
        int[] ids = c.inputIds();
        float[] gl = new float[vocab], cl = new float[vocab];
        try (ModelRunner.Sequence gs = gpu.open(ids.length + 12, PolicySpec.DENSE);
             ModelRunner.Sequence cs = cpu.open(ids.length + 12, PolicySpec.DENSE)) {
          gs.prefill(ids, gl);
          cs.prefill(ids, cl);
          double err = Gpu.relErr(gl, cl);
          System.out.printf("%s (%d tokens): prefill logits relative error vs cpu %.4f%n", where, ids.length, err);
          assertTrue(err <= FP8_LOGIT_TOLERANCE, where + ": prefill logits off by " + err);
          int compared = 0;
          for (int s = 0; s < 12; s++) {
            double maxAbs = 0;
            for (int i = 0; i < vocab; i++) maxAbs = Math.max(maxAbs, Math.abs(gl[i] - cl[i]));
            int want = Sampler.argmax(cl, vocab);
            if (margin(cl, vocab) > 2 * maxAbs) {
              assertEquals(want, Sampler.argmax(gl, vocab), where + ": greedy token " + s);
              compared++;
            }
            gs.decode(want, ids.length + s, gl);
            cs.decode(want, ids.length + s, cl);
            double derr = Gpu.relErr(gl, cl);
            assertTrue(derr <= FP8_LOGIT_TOLERANCE, where + ": decode step " + s + " logits off by " + derr);
          }
          System.out.printf("%s: greedy tokens compared on %d of 12 decode steps%n", where, compared);
        }
      }
    }
  }

  private static float margin(float[] logits, int vocab) {
    float a = Float.NEGATIVE_INFINITY, b = Float.NEGATIVE_INFINITY;
    for (int i = 0; i < vocab; i++) {
      if (logits[i] > a) {
        b = a;
        a = logits[i];
      } else if (logits[i] > b) {
        b = logits[i];
      }
    }
    return a - b;
  }

  /** Which matrices stay FP8: all where the kernels take them; a fused q|k|v with a part the ignore list keeps bf16 does not. */
  @Test
  void fusedMatricesStayFp8UnlessAPartIsKeptInHighPrecision() {
    try (Gpu g = new Gpu()) {
      assumeTrue(g.k.hopper(), "FP8 weights stay FP8 where the sm_90a kernels run");
      Path dir = Goldens.MODELS.resolve("ct-block128");
      ModelConfig c = ModelConfig.read(dir);
      try (Checkpoint ck = Checkpoint.open(dir); CudaWeights w = CudaWeights.load(g.ctx, ck, c, true)) {
        assertTrue(w.hasFp8());
        assertNotNull(w.layers[0].wqkv().fp8());
        assertTrue(w.layers[0].wqkv().fp8().block());
        assertNull(w.layers[1].wqkv().fp8(), "layer 1's v_proj is ignored: q|k|v is dequantized to bf16");
        assertNotNull(w.layers[1].wgu().fp8());
        assertNotNull(w.lmHead.fp8(), "lm_head is a target of this checkpoint");
        assertTrue(w.gateUpUnfused(), "block weights do not fuse the SwiGLU");
      }
    }
  }

  /** The explicit fallback every GPU can run: FP8 weights dequantized to bf16 on load follow the CPU at bf16 tolerance. */
  @ParameterizedTest
  @ValueSource(strings = {"fp8-block128", "ct-channel", "ct-tensor"})
  void dequantizedToBf16OnLoadFollowsCpu(String name) {
    Path dir = Goldens.MODELS.resolve(name);
    try (Gpu g = new Gpu(); Checkpoint ck = Checkpoint.open(dir);
         io.longsieve.cpu.kernels.ThreadPool pool = new io.longsieve.cpu.kernels.ThreadPool(2)) {
      ModelConfig c = ModelConfig.read(dir);
      io.longsieve.cpu.CpuModel cpu = new io.longsieve.cpu.CpuModel(c, io.longsieve.cpu.CpuWeights.load(ck, c), pool, 16);
      int[] ids = new int[40];
      for (int i = 0; i < ids.length; i++) ids[i] = (i * 37 + 11) % c.vocabSize();
      try (CudaWeights w = CudaWeights.load(g.ctx, ck, c, false);
           CudaModel model = new CudaModel(c, g.ctx, g.k, w, 64);
           io.longsieve.cuda.kv.PagedKvCache kv = new io.longsieve.cuda.kv.PagedKvCache(g.ctx, c, 64)) {
        assertFalse(w.hasFp8());
        float[] gl = new float[c.vocabSize()], cl = new float[c.vocabSize()];
        model.prefill(ids, 0, kv, null);
        model.readLogits(gl);
        cpu.forward(ids, 0, ids.length, 0, cpu.newCache(64), new io.longsieve.cpu.policy.DenseAttention(), false, cl);
        Gpu.assertClose(gl, cl, ForwardParityTest.LOGIT_TOLERANCE, name + " dequantized to bf16");
      }
    }
  }
}
