package io.longsieve.cuda;

import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;

/**
 * How q and k rows are laid out for the CUDA kernels' RoPE, one layer's worth (model/Rope decides,
 * CudaWeights applies): device element j of a head is transformers' element {@code order[j]}
 * ({@link Rope#deviceDimOrder}: the identity unless the rotary part is partial), and the rotary
 * elements are multiplied by the attention factor (YaRN's, LongRoPE's; 1 otherwise). Multiplying a
 * vector by s before a rotation equals rotating it with cos·s and sin·s, so q and k scaled here give
 * transformers' logits with the plain table; q·k is the same in any element order applied to both.
 */
record QkLayout(int headDim, int rotaryDim, int[] order, float factor) {

  static QkLayout of(ModelConfig c, int layer) {
    Rope r = Rope.forLayer(c, layer);
    return new QkLayout(c.headDim(), r.rotaryDim(), r.deviceDimOrder(), r.attentionFactor());
  }

  /** Nothing to do: every element rotates and no factor. */
  boolean identity() {
    if (factor != 1f) return false;
    for (int j = 0; j < order.length; j++) if (order[j] != j) return false;
    return true;
  }

  /**
   * In place on {@code heads} heads of rows from a[off]: row (h, j) of headDim rows of {@code cols}
   * floats each becomes transformers' row (h, order[j]), times the factor when {@code scale} and
   * that element rotates. cols 1 for a bias or a norm weight.
   */
  void rows(float[] a, int off, int heads, int cols, boolean scale) {
    if (identity()) return;
    float[] head = new float[headDim * cols];
    for (int h = 0; h < heads; h++) {
      int base = off + h * headDim * cols;
      System.arraycopy(a, base, head, 0, head.length);
      for (int j = 0; j < headDim; j++) {
        int from = order[j];
        float s = scale && from < rotaryDim ? factor : 1f;
        for (int e = 0; e < cols; e++) a[base + j * cols + e] = head[from * cols + e] * s;
      }
    }
  }
}
