package io.longsieve.cpu.kernels;

/**
 * A weight matrix W (rows, cols) stored for {@link Gemm}: the rows (output features) in panels of
 * {@link Tiles#NR}, each panel the transpose of its rows, so a kernel reads it front to back, one
 * NR-wide line per input feature, zero-padded past the last row. Packed once per model load;
 * the heap copy in checkpoint layout is not kept.
 */
public final class PackedMatrix {

  final int rows;        // output features (for gateUp: hidden units)
  final int cols;        // input features
  final boolean gateUp;  // panels hold NR/2 gate units then the same NR/2 up units
  final float[] panels;  // (panels, cols, NR): panels[(p * cols + k) * NR + j] = W[p * NR + j][k]
  final float[] bias;    // (panels * NR) or null

  private PackedMatrix(int rows, int cols, boolean gateUp, float[] panels, float[] bias) {
    this.rows = rows;
    this.cols = cols;
    this.gateUp = gateUp;
    this.panels = panels;
    this.bias = bias;
  }

  /** Output features. */
  public int rows() {
    return rows;
  }

  /** Input features. */
  public int cols() {
    return cols;
  }

  /** Panels of NR output columns (of NR/2 hidden units for a gate/up pair). */
  int panelCount() {
    return panels.length / (cols * Tiles.NR);
  }

  /** Packs w (rows, cols) row-major, with an optional bias (rows). */
  public static PackedMatrix pack(float[] w, int rows, int cols, float[] bias) {
    check(w, rows, cols);
    int nr = Tiles.NR, count = (rows + nr - 1) / nr;
    float[] p = new float[count * cols * nr];
    for (int j = 0; j < rows; j++) {
      int base = (j / nr) * cols * nr + j % nr;
      for (int k = 0; k < cols; k++) p[base + k * nr] = w[j * cols + k];
    }
    float[] b = null;
    if (bias != null) {
      if (bias.length != rows) throw new IllegalArgumentException("bias of " + bias.length + " for " + rows + " rows");
      b = java.util.Arrays.copyOf(bias, count * nr);
    }
    return new PackedMatrix(rows, cols, false, p, b);
  }

  /**
   * Packs a gate projection and an up projection (both (hidden, cols)) side by side for the fused
   * SwiGLU: panel p holds gate units p·NR/2 .. and, next to them, the same units of up.
   */
  public static PackedMatrix gateUp(float[] gate, float[] up, int hidden, int cols) {
    check(gate, hidden, cols);
    check(up, hidden, cols);
    int nr = Tiles.NR, half = nr / 2, count = (hidden + half - 1) / half;
    float[] p = new float[count * cols * nr];
    for (int u = 0; u < hidden; u++) {
      int base = (u / half) * cols * nr + u % half;
      for (int k = 0; k < cols; k++) {
        p[base + k * nr] = gate[u * cols + k];
        p[base + k * nr + half] = up[u * cols + k];
      }
    }
    return new PackedMatrix(hidden, cols, true, p, null);
  }

  private static void check(float[] w, int rows, int cols) {
    if (rows <= 0 || cols <= 0 || w.length != (long) rows * cols) {
      throw new IllegalArgumentException("matrix of " + w.length + " values is not (" + rows + ", " + cols + ")");
    }
  }
}
