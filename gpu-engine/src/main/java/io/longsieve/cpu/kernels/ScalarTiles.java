package io.longsieve.cpu.kernels;

/**
 * {@link Tiles} without the Vector API: the same loops one lane at a time. The fused multiply-adds
 * are {@link Math#fma}, so a tile here has the bits a vector tile has; only the reductions of the
 * softmax (max, sum) may add in another order.
 */
final class ScalarTiles {
  private ScalarTiles() {}

  // 2^x in fp32 (Cephes exp2f): x = n + r with n an integer and |r| ≤ 1/2, 2^r = 1 + r·P(r), P of
  // degree 5, within 2e-7 relative; 2^n goes straight into the exponent bits
  static final float EXP2_LO = -126f;  // below: 0 (2^-126 is the smallest normal result)
  static final float EXP2_HI = 127f;   // above: 2^127 · 2^r, still finite
  static final float LOG2E = 1.44269504088896341f;
  static final float P0 = 1.535336188319500e-4f, P1 = 1.339887440266574e-3f, P2 = 9.618437357674640e-3f;
  static final float P3 = 5.550332471162809e-2f, P4 = 2.402264791363012e-1f, P5 = 6.931472028550421e-1f;
  static final float MAGIC = 12582912f; // 1.5 · 2^23: adding it rounds to an integer, kept in the low bits
  static final int MAGIC_BITS = Float.floatToRawIntBits(MAGIC);

  /** 2^x; the operations of {@link VectorTiles#exp2}, one lane. */
  static float exp2(float x) {
    if (!(x >= EXP2_LO)) return x < EXP2_LO ? 0f : x; // NaN stays NaN
    x = Math.min(x, EXP2_HI);
    float t = x + MAGIC;
    float r = x - (t - MAGIC);
    float p = Math.fma(r, P0, P1);
    p = Math.fma(p, r, P2);
    p = Math.fma(p, r, P3);
    p = Math.fma(p, r, P4);
    p = Math.fma(p, r, P5);
    float y = Math.fma(p, r, 1f);
    return y * Float.intBitsToFloat((Float.floatToRawIntBits(t) - (MAGIC_BITS - 127)) << 23);
  }

  /** e^x = 2^(x·log2 e). */
  static float exp(float x) {
    return exp2(x * LOG2E);
  }

  static void tile(int rows, float[] a, int ao, int lda, float[] b, int bo, int k, float[] c, int co, int ldc,
                   int cols, int mode, float[] aux, int auxo) {
    int nr = Tiles.NR, half = nr / 2;
    float[] acc = new float[nr];
    for (int r = 0; r < rows; r++) {
      if (mode == Tiles.ACCUMULATE) System.arraycopy(c, co + r * ldc, acc, 0, nr);
      else java.util.Arrays.fill(acc, 0f);
      for (int i = 0, p = bo; i < k; i++, p += nr) {
        float x = a[ao + r * lda + i];
        for (int j = 0; j < nr; j++) acc[j] = Math.fma(x, b[p + j], acc[j]);
      }
      int o = co + r * ldc;
      if (mode == Tiles.SWIGLU) {
        for (int j = 0; j < cols; j++) {
          float g = acc[j];
          c[o + j] = g / (exp2(g * -LOG2E) + 1f) * acc[half + j];
        }
        continue;
      }
      if (mode == Tiles.ACCUMULATE) {
        System.arraycopy(acc, 0, c, o, nr);
        continue;
      }
      for (int j = 0; j < cols; j++) {
        float v = mode == Tiles.BIAS ? acc[j] + aux[auxo + j] : acc[j];
        c[o + j] = mode == Tiles.ADD ? c[o + j] + v : v;
      }
    }
  }

  /** {@link Tiles#packedTile}: the rows unpacked to row-major, then {@link #tile} (the same chains). */
  static void packedTile(int rows, float[] ap, int apo, float[] b, int bo, int k, float[] c, int co, int ldc,
                         int cols, int mode, float[] aux, int auxo) {
    float[] a = new float[rows * k]; // (rows, k)
    for (int r = 0; r < rows; ) {
      int h = Tiles.groupHeight(rows, r);
      for (int t = 0; t < h; t++) for (int i = 0; i < k; i++) a[(r + t) * k + i] = ap[apo + r * k + i * h + t];
      r += h;
    }
    tile(rows, a, 0, k, b, bo, k, c, co, ldc, cols, mode, aux, auxo);
  }

  static boolean rowsStayBelow(float[] s, int so, int rows, float[] m, int r0) {
    int n = TiledAttention.KEY_TILE;
    for (int t = 0; t < rows; t++) {
      if (m[r0 + t] == Float.NEGATIVE_INFINITY) return false;
      float limit = m[r0 + t] + Tiles.SLACK;
      for (int j = 0; j < n; j++) if (s[so + t * n + j] > limit) return false;
    }
    return true;
  }

  static boolean softmaxStep(float[] s, int so, float[] m, float[] l, int r, float[] o, int oo, int width) {
    int n = TiledAttention.KEY_TILE;
    float mOld = m[r], mNew = mOld, tileMax = Float.NEGATIVE_INFINITY;
    for (int j = 0; j < n; j++) tileMax = Math.max(tileMax, s[so + j]);
    if (mOld == Float.NEGATIVE_INFINITY || tileMax > mOld + Tiles.SLACK) {
      if (tileMax == Float.NEGATIVE_INFINITY) {
        java.util.Arrays.fill(s, so, so + n, 0f);
        return false;
      }
      mNew = Math.max(mOld, tileMax);
    }
    if (mNew != mOld) {
      float alpha = exp2(mOld - mNew);
      l[r] *= alpha;
      for (int e = 0; e < width; e++) o[oo + e] *= alpha;
      m[r] = mNew;
    }
    softmaxKeep(s, so, m, l, r);
    return true;
  }

  static void softmaxKeep(float[] s, int so, float[] m, float[] l, int r) {
    int n = TiledAttention.KEY_TILE;
    float total = 0, max = m[r];
    for (int j = 0; j < n; j++) total += s[so + j] = exp2(s[so + j] - max);
    l[r] += total;
  }
}
