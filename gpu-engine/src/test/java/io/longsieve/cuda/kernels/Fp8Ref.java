package io.longsieve.cuda.kernels;

import io.longsieve.model.DType;
import java.util.Random;

/**
 * The CPU twins of fp8/fp8.cu's activation quantization (quant_fp8_rows, quant_fp8_groups) and the
 * dequantization the FP8 GEMM's epilogue amounts to: plain loops in fp32, the same divisions and the
 * same round-to-nearest-even saturating cast (DType.floatToE4m3), so bytes and scales match exactly.
 */
final class Fp8Ref {
  private Fp8Ref() {}

  static final float FP8_MAX = 448f;
  static final int GROUP = Fp8Kernels.GROUP;

  /** Quantized activations: q (m, k) e4m3 and their scales ((m) or (m, ceil(k / 128))). */
  record Quantized(byte[] q, float[] scales) {}

  static float scaleOf(float amax) {
    return amax > 0 ? amax / FP8_MAX : 1f;
  }

  /** quant_fp8_rows: one scale per row (fixed when non-null). */
  static Quantized rows(float[] x, int m, int k, Float fixed) {
    byte[] q = new byte[m * k];
    float[] s = new float[m];
    for (int r = 0; r < m; r++) {
      float amax = 0;
      for (int c = 0; c < k; c++) amax = Math.max(amax, Math.abs(x[r * k + c]));
      s[r] = fixed != null ? fixed : scaleOf(amax);
      for (int c = 0; c < k; c++) q[r * k + c] = DType.floatToE4m3(x[r * k + c] / s[r]);
    }
    return new Quantized(q, s);
  }

  /** quant_fp8_groups: one scale per row and 128 columns; perRow: the row's scale in every group. */
  static Quantized groups(float[] x, int m, int k, Float fixed, boolean perRow) {
    int groups = (k + GROUP - 1) / GROUP;
    byte[] q = new byte[m * k];
    float[] s = new float[m * groups];
    for (int r = 0; r < m; r++) {
      float rowMax = 0;
      for (int c = 0; c < k; c++) rowMax = Math.max(rowMax, Math.abs(x[r * k + c]));
      for (int g = 0; g < groups; g++) {
        float amax = 0;
        for (int c = g * GROUP; c < Math.min(k, (g + 1) * GROUP); c++) amax = Math.max(amax, Math.abs(x[r * k + c]));
        float sc = fixed != null ? fixed : scaleOf(perRow ? rowMax : amax);
        s[r * groups + g] = sc;
        for (int c = g * GROUP; c < Math.min(k, (g + 1) * GROUP); c++) q[r * k + c] = DType.floatToE4m3(x[r * k + c] / sc);
      }
    }
    return new Quantized(q, s);
  }

  /**
   * (rows, cols) fp32 = e4m3 q times its scale: one per row (scales (rows)), or per 128 x 128 block
   * (scales (ceil(rows / 128), ceil(cols / 128))) when block, or per row and 128 columns (activations
   * quantized by groups: scales (rows, ceil(cols / 128))) when groups.
   */
  static float[] dequantize(byte[] q, float[] scales, int rows, int cols, boolean block, boolean groups) {
    int kb = (cols + GROUP - 1) / GROUP;
    float[] out = new float[rows * cols];
    for (int r = 0; r < rows; r++) {
      for (int c = 0; c < cols; c++) {
        float s = block ? scales[(r / GROUP) * kb + c / GROUP] : groups ? scales[r * kb + c / GROUP] : scales[r];
        out[r * cols + c] = DType.e4m3ToFloat(q[r * cols + c]) * s;
      }
    }
    return out;
  }

  /** Random finite e4m3 weights of a Gaussian's shape (NaN codes never drawn). */
  static byte[] randomE4m3(Random rnd, int n) {
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) b[i] = DType.floatToE4m3((float) (rnd.nextGaussian() * 64));
    return b;
  }

  /** Positive scales around 1/448 of unit-scale weights. */
  static float[] randomScales(Random rnd, int n, double around) {
    float[] s = new float[n];
    for (int i = 0; i < n; i++) s[i] = (float) (around * (0.5 + rnd.nextDouble()));
    return s;
  }
}
