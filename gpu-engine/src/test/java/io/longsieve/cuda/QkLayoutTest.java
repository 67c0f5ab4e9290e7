package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.longsieve.cpu.kernels.FamilyOps;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The CUDA backend's q/k layout (QkLayout: reordered partial-rotary heads, the attention factor
 * folded into the rotary elements) with its plain rotate-half kernel math and zero-padded table
 * gives the attention logits the CPU's Rope gives (cos and sin times the factor, the pass-through
 * elements left alone): Phi-4-mini (partial 0.75, LongRoPE), Qwen3 with YaRN (q/k norm: the factor
 * goes into the norm weights), Qwen2.5 with YaRN (biases). Plain Java: runs without a GPU.
 */
class QkLayoutTest {

  @ParameterizedTest
  @CsvSource({"phi-4-mini, 0", "phi-4-mini, 5000", "qwen3-8b-yarn, 0", "qwen2.5-7b-yarn, 0"})
  void deviceLayoutGivesTheCpuLogits(String name, int extraLength) throws Exception {
    ObjectNode json = (ObjectNode) new ObjectMapper().readTree(Path.of("src/test/resources/configs", name + ".json").toFile());
    ModelConfig c = ModelConfig.parse(json, name);
    Rope rope = Rope.forLayer(c, 0).atLength(1 + extraLength);  // past 4096: LongRoPE's long factors
    QkLayout layout = new QkLayout(c.headDim(), rope.rotaryDim(), rope.deviceDimOrder(), rope.attentionFactor());
    int d = c.headDim();
    Random r = new Random(3);
    float[] q = new float[d], k = new float[d], w = new float[d];
    for (int i = 0; i < d; i++) {
      q[i] = (float) r.nextGaussian();
      k[i] = (float) r.nextGaussian();
      w[i] = 1 + 0.1f * (float) r.nextGaussian();
    }
    boolean norm = c.traits().qkNorm();
    int qPos = 4500 + extraLength, kPos = 17;
    // CPU: (norm,) then Rope with cos, sin times the factor
    float[] cq = q.clone(), ck = k.clone();
    if (norm) {
      FamilyOps.headNorm(cq, 0, 1, d, 1, d, w, 1e-6);
      FamilyOps.headNorm(ck, 0, 1, d, 1, d, w, 1e-6);
    }
    rope.rotate(cq, 0, 1, qPos);
    rope.rotate(ck, 0, 1, kPos);
    // device: rows reordered (and scaled unless a norm follows), norm weights likewise, plain table
    float[] dq = q.clone(), dk = k.clone(), dw = w.clone();
    layout.rows(dq, 0, 1, 1, !norm);
    layout.rows(dk, 0, 1, 1, !norm);
    if (norm) {
      layout.rows(dw, 0, 1, 1, true);
      FamilyOps.headNorm(dq, 0, 1, d, 1, d, dw, 1e-6);
      FamilyOps.headNorm(dk, 0, 1, d, 1, d, dw, 1e-6);
    }
    float[] table = rope.deviceInverseFrequencies();
    rotateLikeTheKernel(dq, table, qPos);
    rotateLikeTheKernel(dk, table, kPos);
    assertEquals(dot(cq, ck), dot(dq, dk), 1e-4 * Math.max(1, Math.abs(dot(cq, ck))), name);
  }

  /** elementwise.cu rope_rows: pairs (i, i + d/2) of the whole head, angle pos * invFreq[i], no factor. */
  private static void rotateLikeTheKernel(float[] v, float[] invFreq, int pos) {
    int half = v.length / 2;
    for (int i = 0; i < half; i++) {
      float a = (float) pos * invFreq[i], c = (float) Math.cos(a), s = (float) Math.sin(a);
      float x1 = v[i], x2 = v[half + i];
      v[i] = x1 * c - x2 * s;
      v[half + i] = x2 * c + x1 * s;
    }
  }

  private static double dot(float[] a, float[] b) {
    double s = 0;
    for (int i = 0; i < a.length; i++) s += (double) a[i] * b[i];
    return s;
  }
}
