package io.longsieve.cpu.kernels;

/**
 * The element-wise steps some families add to Llama's layer, in fp32 as transformers computes them:
 * the per-head q/k RMSNorm (Qwen3, Gemma 3), GeGLU with the tanh GELU (Gemma 3), soft-capping
 * (Gemma's final_logit_softcapping) and scaling (Gemma's embedding scale). Each is the reference
 * its GPU kernel is tested against (elementwise/family.cu).
 */
public final class FamilyOps {
  private FamilyOps() {}

  /**
   * RMSNorm of every head vector in place: rows of {@code stride} floats from x[off], each holding
   * {@code heads} consecutive vectors of {@code headDim}, normalised with weight (headDim).
   */
  public static void headNorm(float[] x, int off, int rows, int stride, int heads, int headDim, float[] weight,
                              double eps) {
    for (int r = 0; r < rows; r++) {
      for (int h = 0; h < heads; h++) {
        int o = off + r * stride + h * headDim;
        CpuOps.rmsNorm(x, o, x, o, weight, headDim, eps);
      }
    }
  }

  /** gate = gelu_tanh(gate) · up over n elements (GeGLU; PyTorch's gelu(approximate="tanh")). */
  public static void geglu(float[] gate, float[] up, int n) {
    for (int i = 0; i < n; i++) gate[i] = geluTanh(gate[i]) * up[i];
  }

  /** 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))), in double, rounded once. */
  public static float geluTanh(float x) {
    double v = x;
    return (float) (0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v * v * v))));
  }

  /** v = cap · tanh(v / cap) over n elements from off (soft-capping). */
  public static void softcap(float[] v, int off, int n, float cap) {
    for (int i = off; i < off + n; i++) v[i] = (float) Math.tanh(v[i] / cap) * cap;
  }

  /** v *= s over n elements from off. */
  public static void scale(float[] v, int off, int n, float s) {
    for (int i = off; i < off + n; i++) v[i] *= s;
  }
}
