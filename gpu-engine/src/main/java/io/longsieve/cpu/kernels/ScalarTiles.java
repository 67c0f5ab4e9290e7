package io.longsieve.cpu.kernels;

/**
 * {@link Tiles} without the Vector API: the same loops one lane at a time. The fused multiply-adds
 * are {@link Math#fma}, so a tile here has the bits a vector tile has; only the reductions of the
 * softmax (max, sum) may add in another order.
 */
final class ScalarTiles {
  private ScalarTiles() {}

  // e^x in fp32 (Cephes expf): x = n·ln2 + r, |r| ≤ ln2/2, e^r by a degree-5 polynomial
  static final float EXP_LO = -87.3f;  // below: 0 (e^-87.3 is the smallest normal result)
  static final float EXP_HI = 88.3f;   // above: e^88.3 (2^127 · e^r stays finite)
  static final float LOG2E = 1.44269504088896341f;
  static final float LN2_HI = 0.693359375f;
  static final float LN2_LO = -2.12194440e-4f;
  static final float P0 = 1.9875691500e-4f, P1 = 1.3981999507e-3f, P2 = 8.3334519073e-3f;
  static final float P3 = 4.1665795894e-2f, P4 = 1.6666665459e-1f, P5 = 5.0000001201e-1f;
  private static final float MAGIC = 12582912f; // 1.5 · 2^23
  private static final int MAGIC_BITS = Float.floatToRawIntBits(MAGIC);

  /** e^x within 2 ulp; the operations of {@link VectorTiles#exp}, one lane. */
  static float exp(float x) {
    if (!(x >= EXP_LO)) return x < EXP_LO ? 0f : x; // NaN stays NaN
    x = Math.min(x, EXP_HI);
    float t = Math.fma(x, LOG2E, MAGIC);
    float n = t - MAGIC;
    float r = Math.fma(n, -LN2_HI, x);
    r = Math.fma(n, -LN2_LO, r);
    float p = Math.fma(r, P0, P1);
    p = Math.fma(p, r, P2);
    p = Math.fma(p, r, P3);
    p = Math.fma(p, r, P4);
    p = Math.fma(p, r, P5);
    float y = p * (r * r) + r + 1f;
    return y * Float.intBitsToFloat((Float.floatToRawIntBits(t) - MAGIC_BITS + 127) << 23);
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
          c[o + j] = g / (exp(-g) + 1f) * acc[half + j];
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

  static boolean softmaxStep(float[] s, int so, int n, float[] m, float[] l, int r, float[] o, int oo, int width) {
    float tileMax = Float.NEGATIVE_INFINITY;
    for (int j = 0; j < n; j++) tileMax = Math.max(tileMax, s[so + j]);
    if (tileMax == Float.NEGATIVE_INFINITY) {
      java.util.Arrays.fill(s, so, so + n, 0f);
      return false;
    }
    float mOld = m[r], mNew = Math.max(mOld, tileMax), total = 0;
    for (int j = 0; j < n; j++) total += s[so + j] = exp(s[so + j] - mNew);
    if (mNew != mOld) {
      float alpha = exp(mOld - mNew);
      l[r] *= alpha;
      for (int e = 0; e < width; e++) o[oo + e] *= alpha;
      m[r] = mNew;
    }
    l[r] += total;
    return true;
  }
}
