package io.longsieve.cpu.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * SIMD inner loops through the Vector API. Only touched when the jdk.incubator.vector module is
 * present (see {@link CpuOps#VECTOR}); otherwise the scalar loops in CpuOps run.
 */
final class VectorKernels {
  private VectorKernels() {}

  private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;

  static float dot(float[] a, int ao, float[] b, int bo, int n) {
    FloatVector acc = FloatVector.zero(S);
    int i = 0;
    for (int upper = S.loopBound(n); i < upper; i += S.length()) {
      acc = FloatVector.fromArray(S, a, ao + i).fma(FloatVector.fromArray(S, b, bo + i), acc);
    }
    float sum = acc.reduceLanes(VectorOperators.ADD);
    for (; i < n; i++) sum += a[ao + i] * b[bo + i];
    return sum;
  }

  /** Four dot products of one weight row with four activation rows: the row is loaded once. */
  static void dot4(float[] w, int wo, float[] x, int x0, int x1, int x2, int x3, int n, float[] out, int o0, int o1,
                   int o2, int o3) {
    FloatVector a0 = FloatVector.zero(S), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (int upper = S.loopBound(n); i < upper; i += S.length()) {
      FloatVector wv = FloatVector.fromArray(S, w, wo + i);
      a0 = wv.fma(FloatVector.fromArray(S, x, x0 + i), a0);
      a1 = wv.fma(FloatVector.fromArray(S, x, x1 + i), a1);
      a2 = wv.fma(FloatVector.fromArray(S, x, x2 + i), a2);
      a3 = wv.fma(FloatVector.fromArray(S, x, x3 + i), a3);
    }
    float s0 = a0.reduceLanes(VectorOperators.ADD), s1 = a1.reduceLanes(VectorOperators.ADD);
    float s2 = a2.reduceLanes(VectorOperators.ADD), s3 = a3.reduceLanes(VectorOperators.ADD);
    for (; i < n; i++) {
      float wi = w[wo + i];
      s0 += wi * x[x0 + i];
      s1 += wi * x[x1 + i];
      s2 += wi * x[x2 + i];
      s3 += wi * x[x3 + i];
    }
    out[o0] = s0;
    out[o1] = s1;
    out[o2] = s2;
    out[o3] = s3;
  }

  /** y[yo..yo+n) += a * x[xo..xo+n) */
  static void axpy(float a, float[] x, int xo, float[] y, int yo, int n) {
    FloatVector av = FloatVector.broadcast(S, a);
    int i = 0;
    for (int upper = S.loopBound(n); i < upper; i += S.length()) {
      FloatVector.fromArray(S, x, xo + i).fma(av, FloatVector.fromArray(S, y, yo + i)).intoArray(y, yo + i);
    }
    for (; i < n; i++) y[yo + i] += a * x[xo + i];
  }
}
