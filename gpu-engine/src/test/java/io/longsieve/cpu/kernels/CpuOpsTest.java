package io.longsieve.cpu.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** The blocked, threaded matmul against the textbook triple loop in fp64. */
class CpuOpsTest {

  @Test
  void matmulMatchesNaiveOnRandomSizes() {
    Random r = new Random(3);
    try (ThreadPool pool = new ThreadPool(3)) {
      for (int trial = 0; trial < 12; trial++) {
        int n = 1 + r.nextInt(9), in = 1 + r.nextInt(70), out = 1 + r.nextInt(40);
        float[] x = rand(r, n * in), w = rand(r, out * in), b = rand(r, out), y = new float[n * out];
        CpuOps.matmul(pool, y, x, n, w, trial % 2 == 0 ? b : null, out, in);
        for (int i = 0; i < n; i++) {
          for (int j = 0; j < out; j++) {
            double s = trial % 2 == 0 ? b[j] : 0;
            for (int k = 0; k < in; k++) s += (double) x[i * in + k] * w[j * in + k];
            assertEquals(s, y[i * out + j], 1e-4 * (1 + Math.abs(s)), "n=" + n + " in=" + in + " out=" + out);
          }
        }
      }
    }
  }

  @Test
  void rmsNormAndSoftmaxFollowTheirDefinitions() {
    float[] x = {1, -2, 3, -4}, w = {1, 0.5f, 2, 1}, out = new float[4];
    CpuOps.rmsNorm(out, 0, x, 0, w, 4, 1e-6);
    double rms = Math.sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6);
    for (int i = 0; i < 4; i++) assertEquals(w[i] * x[i] / rms, out[i], 1e-6);
    float[] v = {1, 2, 3};
    CpuOps.softmax(v, 0, 3);
    double z = Math.exp(1) + Math.exp(2) + Math.exp(3);
    assertEquals(Math.exp(2) / z, v[1], 1e-6);
  }

  private static float[] rand(Random r, int n) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) a[i] = (float) r.nextGaussian();
    return a;
  }
}
