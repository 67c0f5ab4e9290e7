package io.longsieve.cpu.kernels;

/**
 * The plain fp32 definitions of the model's operations. They are the reference every CUDA kernel
 * is tested against, so they stay simple: loops in the order of the math, fp32 accumulation, the
 * Vector API only inside dot products.
 */
public final class CpuOps {
  private CpuOps() {}

  /** True when jdk.incubator.vector is in the boot layer (add it with --add-modules). */
  public static final boolean VECTOR = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent();

  /** True when the GEMM blocks and attention tasks run in the C kernels ({@link NativeTiles}). */
  public static boolean nativeTiles() {
    return NativeTiles.enabled;
  }

  public static float dot(float[] a, int ao, float[] b, int bo, int n) {
    if (VECTOR) return VectorKernels.dot(a, ao, b, bo, n);
    float s = 0;
    for (int i = 0; i < n; i++) s += a[ao + i] * b[bo + i];
    return s;
  }

  /** y += a·x over n elements. */
  public static void axpy(float a, float[] x, int xo, float[] y, int yo, int n) {
    if (VECTOR) {
      VectorKernels.axpy(a, x, xo, y, yo, n);
      return;
    }
    for (int i = 0; i < n; i++) y[yo + i] += a * x[xo + i];
  }

  /** out = x / sqrt(mean(x²) + eps) · weight, per row of {@code dim} (as transformers' LlamaRMSNorm). */
  public static void rmsNorm(float[] out, int oo, float[] x, int xo, float[] weight, int dim, double eps) {
    float ss = 0;
    for (int i = 0; i < dim; i++) ss += x[xo + i] * x[xo + i];
    float inv = (float) (1.0 / Math.sqrt(ss / dim + eps));
    for (int i = 0; i < dim; i++) out[oo + i] = weight[i] * (x[xo + i] * inv);
  }

  /**
   * out(n, outDim) = x(n, inDim) · w(outDim, inDim)ᵀ + bias. Rows of w are split over threads;
   * each weight row is multiplied with four activation rows at a time so it is read once per four.
   */
  public static void matmul(ThreadPool pool, float[] out, float[] x, int n, float[] w, float[] bias, int outDim,
                            int inDim) {
    // below ~64K multiply-adds handing work to other threads costs more than it saves
    if ((long) n * outDim * inDim < 65_536) {
      matmulRows(out, x, n, w, bias, outDim, inDim, 0, outDim);
      return;
    }
    pool.forRange(outDim, (from, to) -> matmulRows(out, x, n, w, bias, outDim, inDim, from, to));
  }

  static void matmulRows(float[] out, float[] x, int n, float[] w, float[] bias, int outDim, int inDim, int from,
                         int to) {
    for (int j = from; j < to; j++) {
      int wo = j * inDim;
      int i = 0;
      if (VECTOR) {
        for (; i + 4 <= n; i += 4) {
          VectorKernels.dot4(w, wo, x, i * inDim, (i + 1) * inDim, (i + 2) * inDim, (i + 3) * inDim, inDim, out,
              i * outDim + j, (i + 1) * outDim + j, (i + 2) * outDim + j, (i + 3) * outDim + j);
        }
      }
      for (; i < n; i++) out[i * outDim + j] = dot(w, wo, x, i * inDim, inDim);
      if (bias != null) for (int r = 0; r < n; r++) out[r * outDim + j] += bias[j];
    }
  }

  /** gate = silu(gate) · up, elementwise over n (SwiGLU's inner product). */
  public static void swiglu(float[] gate, float[] up, int n) {
    for (int i = 0; i < n; i++) {
      float g = gate[i];
      gate[i] = (float) (g / (1.0 + Math.exp(-g))) * up[i];
    }
  }

  /** Softmax of v[off..off+n) in place, max-subtracted, fp32 sums. */
  public static void softmax(float[] v, int off, int n) {
    float max = Float.NEGATIVE_INFINITY;
    for (int i = 0; i < n; i++) max = Math.max(max, v[off + i]);
    float sum = 0;
    for (int i = 0; i < n; i++) {
      float e = (float) Math.exp(v[off + i] - max);
      v[off + i] = e;
      sum += e;
    }
    float inv = 1f / sum;
    for (int i = 0; i < n; i++) v[off + i] *= inv;
  }

  /** Copies row {@code token} of the embedding table (vocab, dim) into out. */
  public static void embed(float[] out, int oo, float[] table, int token, int dim) {
    System.arraycopy(table, token * dim, out, oo, dim);
  }

  /**
   * The nucleus the device sampler keeps: probabilities p = softmax(logits / temperature) in
   * double, kept where p >= the largest threshold whose kept mass reaches topP (ties at the
   * threshold all stay). Returns the kept mask.
   */
  public static boolean[] topPNucleus(float[] logits, int vocab, double temperature, double topP) {
    double[] p = new double[vocab];
    double max = Double.NEGATIVE_INFINITY, z = 0;
    for (int i = 0; i < vocab; i++) max = Math.max(max, logits[i]);
    for (int i = 0; i < vocab; i++) z += p[i] = Math.exp((logits[i] - max) / temperature);
    double[] sorted = new double[vocab];
    for (int i = 0; i < vocab; i++) sorted[i] = p[i] /= z;
    java.util.Arrays.sort(sorted);
    double mass = 0, threshold = 0;
    for (int i = vocab - 1; i >= 0; i--) {
      mass += sorted[i];
      threshold = sorted[i];
      if (mass >= topP) break;
    }
    boolean[] keep = new boolean[vocab];
    for (int i = 0; i < vocab; i++) keep[i] = p[i] >= threshold;
    return keep;
  }

  /**
   * Top-p sampling in id order, the definition the device kernel follows: the first kept id at
   * which the running kept mass exceeds u times the kept mass.
   */
  public static int topPIndexOrder(float[] logits, int vocab, double temperature, double topP, double u) {
    boolean[] keep = topPNucleus(logits, vocab, temperature, topP);
    double max = Double.NEGATIVE_INFINITY, z = 0;
    for (int i = 0; i < vocab; i++) max = Math.max(max, logits[i]);
    double[] p = new double[vocab];
    for (int i = 0; i < vocab; i++) z += p[i] = Math.exp((logits[i] - max) / temperature);
    double kept = 0;
    for (int i = 0; i < vocab; i++) if (keep[i]) kept += p[i] / z;
    double target = u * kept, acc = 0;
    int last = 0;
    for (int i = 0; i < vocab; i++) {
      if (!keep[i]) continue;
      last = i;
      acc += p[i] / z;
      if (target < acc) return i;
    }
    return last;
  }
}
