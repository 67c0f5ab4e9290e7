package io.longsieve.model;

import io.longsieve.model.QuantizationConfig.Activations;
import io.longsieve.model.QuantizationConfig.Granularity;
import io.longsieve.model.QuantizationConfig.Scheme;
import java.util.Arrays;

/**
 * One FP8 linear weight as the checkpoint stores it: e4m3 values, their scales and, for static
 * activation quantization, the input scale, each checked against the others and the config when it
 * is resolved (headers only; no weight is read).
 *
 * <p>Dequantized, element (r, c) is {@code round(e4m3(q[r][c]) * s[r / rowsPerScale][c / colsPerScale])}:
 * the product in fp32, rounded to {@link #product}. That is transformers' Fp8Dequantize for the fp8
 * format ({@code q.to(float32) * scale.to(float32)}, kept in fp32 when the model is loaded in fp32)
 * and compressed-tensors' {@code _dequantize} ({@code x_q.to(scale.dtype) * scale}: a bf16 or f16
 * product, exact in fp32 before its one rounding). Blocks at the right and bottom edges may be
 * partial (ceil-divided scale grids, as compressed-tensors and vLLM lay them out).
 *
 * @param weight     (rows, cols) F8_E4M3
 * @param scale      TENSOR: (), (1) or (1, 1); CHANNEL: (rows, 1) or (rows); BLOCK: (ceil(rows / bn), ceil(cols / bk))
 * @param scheme     granularity, block and activation quantization, from quantization_config
 * @param product    what q * s is rounded to: F32 (fp8 format), the scale's own dtype (compressed-tensors)
 * @param inputScale () or (1): the static activation scale; null unless scheme.activations() is STATIC_TENSOR
 */
public record Fp8Weight(TensorInfo weight, TensorInfo scale, Scheme scheme, DType product, TensorInfo inputScale) {

  public long rows() {
    return weight.shape()[0];
  }

  public long cols() {
    return weight.shape()[1];
  }

  /** Weight rows that share one row of scales. */
  public long rowsPerScale() {
    switch (scheme.granularity()) {
      case TENSOR: return rows();
      case CHANNEL: return 1;
      default: return scheme.blockRows();
    }
  }

  /** Weight columns that share one scale. */
  public long colsPerScale() {
    return scheme.granularity() == Granularity.BLOCK ? scheme.blockCols() : cols();
  }

  public int scaleRows() {
    return (int) ceilDiv(rows(), rowsPerScale());
  }

  public int scaleCols() {
    return (int) ceilDiv(cols(), colsPerScale());
  }

  /**
   * Checks weight {@code w} (dtype F8_E4M3) against the config and its scale tensors.
   *
   * @throws CheckpointException naming the tensor and what is wrong
   */
  static Fp8Weight resolve(Checkpoint ck, QuantizationConfig q, TensorInfo w) {
    String where = w.file() + ": tensor '" + w.name() + "'";
    if (w.shape().length != 2 || !w.name().endsWith(".weight")) {
      throw new CheckpointException(where + " is F8_E4M3 but not the 2-D weight of a linear layer");
    }
    if (!q.isQuantized()) {
      throw new CheckpointException(where + " is F8_E4M3 but config.json has no quantization_config");
    }
    String module = w.name().substring(0, w.name().length() - ".weight".length());
    Scheme scheme = q.schemeOf(module);
    if (scheme == null) {
      throw new CheckpointException(where + " is F8_E4M3 but " + q.where() + " keeps module '" + module
          + "' in high precision (ignore / modules_to_not_convert, or no target)");
    }
    String scaleName = q.scaleName(w.name());
    if (!ck.has(scaleName)) throw new CheckpointException(where + " is F8_E4M3 but its scale '" + scaleName + "' is missing");
    TensorInfo s = ck.info(scaleName);
    if (s.dtype() == DType.F8_E4M3) throw new CheckpointException(s.file() + ": scale '" + scaleName + "' must be F32, BF16 or F16");
    Fp8Weight f = new Fp8Weight(w, s, scheme,
        q.format() == QuantizationConfig.Format.FP8 ? DType.F32 : s.dtype(), null);
    if (!scaleShapeFits(s.shape(), f)) {
      throw new CheckpointException(s.file() + ": scale '" + scaleName + "' has shape " + s.shapeString() + ", but weight "
          + w.shapeString() + " with " + scheme + " needs " + expectedScaleShape(f));
    }
    if (scheme.activations() != Activations.STATIC_TENSOR) return f;
    String inName = q.inputScaleName(module);
    if (!ck.has(inName)) throw new CheckpointException(where + ": static activation scale '" + inName + "' is missing");
    TensorInfo in = ck.info(inName);
    if (in.numel() != 1 || in.shape().length > 1 || in.dtype() == DType.F8_E4M3) {
      throw new CheckpointException(in.file() + ": activation scale '" + inName + "' must be one float, got "
          + in.dtype() + " " + in.shapeString());
    }
    return new Fp8Weight(w, s, scheme, f.product(), in);
  }

  private static boolean scaleShapeFits(long[] shape, Fp8Weight f) {
    switch (f.scheme().granularity()) {
      case TENSOR:
        return shape.length <= 2 && Arrays.stream(shape).allMatch(d -> d == 1);
      case CHANNEL:
        return (shape.length == 2 && shape[0] == f.rows() && shape[1] == 1) || (shape.length == 1 && shape[0] == f.rows());
      default:
        return shape.length == 2 && shape[0] == f.scaleRows() && shape[1] == f.scaleCols();
    }
  }

  private static String expectedScaleShape(Fp8Weight f) {
    switch (f.scheme().granularity()) {
      case TENSOR: return "[] or [1]";
      case CHANNEL: return "[" + f.rows() + ", 1]";
      default: return "[" + f.scaleRows() + ", " + f.scaleCols() + "]";
    }
  }

  /**
   * Dequantizes in place: {@code values} (rows * cols) holds the decoded e4m3 values on entry and the
   * weights on return; {@code scales} (scaleRows * scaleCols) the scale tensor widened to fp32.
   */
  public void dequantize(float[] values, float[] scales) {
    int cols = (int) cols(), sc = scaleCols();
    long rps = rowsPerScale(), cps = colsPerScale();
    for (int r = 0; r < rows(); r++) {
      int srow = (int) (r / rps) * sc;
      for (int c = 0; c < cols; c++) {
        int i = r * cols + c;
        values[i] = round(values[i] * scales[srow + (int) (c / cps)]);
      }
    }
  }

  /** One element of {@link #dequantize}: the decoded e4m3 value q at (row, col), for streaming loaders. */
  public float dequantize(float q, long row, long col, float[] scales) {
    return round(q * scales[(int) ((row / rowsPerScale()) * scaleCols() + col / colsPerScale())]);
  }

  private float round(float v) {
    switch (product) {
      case BF16: return DType.bf16ToFloat(DType.floatToBf16(v));
      case F16: return DType.f16ToFloat(DType.floatToF16(v));
      default: return v;
    }
  }

  private static long ceilDiv(long a, long b) {
    return (a + b - 1) / b;
  }
}
