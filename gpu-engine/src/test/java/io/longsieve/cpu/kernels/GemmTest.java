package io.longsieve.cpu.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The packed, register-tiled GEMMs against the textbook loops in fp64 on random odd sizes (tails of
 * rows, panels and vector lanes), and the promises the model relies on: a row's result does not
 * depend on the rows beside it or the thread count (batched decode equals single-row decode bit
 * for bit), and the scalar tiles (no Vector API) compute the vector tiles' bits.
 */
class GemmTest {

  @Test
  void matmulBiasAndResidualMatchTheDefinition() {
    Random r = new Random(11);
    try (ThreadPool pool = new ThreadPool(3)) {
      for (int trial = 0; trial < 30; trial++) {
        int n = 1 + r.nextInt(trial < 20 ? 9 : 100), cols = 1 + r.nextInt(trial < 20 ? 300 : 150), rows = 1 + r.nextInt(trial < 20 ? 70 : 130);
        float[] x = rand(r, n * cols), w = rand(r, rows * cols), b = rand(r, rows), base = rand(r, n * rows);
        boolean bias = trial % 2 == 0;
        float[] y = new float[n * rows];
        Gemm.matmul(pool, y, x, n, PackedMatrix.pack(w, rows, cols, bias ? b : null));
        float[] acc = base.clone();
        Gemm.matmulAdd(pool, acc, x, n, PackedMatrix.pack(w, rows, cols, null));
        for (int i = 0; i < n; i++) {
          for (int j = 0; j < rows; j++) {
            double s = 0, mag = 0;
            for (int k = 0; k < cols; k++) {
              s += (double) x[i * cols + k] * w[j * cols + k];
              mag += Math.abs((double) x[i * cols + k] * w[j * cols + k]);
            }
            String where = "n=" + n + " cols=" + cols + " rows=" + rows + " at " + i + "," + j;
            double tol = 1e-6 * (1 + mag);
            assertEquals(s + (bias ? b[j] : 0), y[i * rows + j], tol, where);
            assertEquals(base[i * rows + j] + s, acc[i * rows + j], tol + 1e-6 * Math.abs(base[i * rows + j]), where);
          }
        }
      }
    }
  }

  @Test
  void swigluMatchesTheDefinition() {
    Random r = new Random(12);
    try (ThreadPool pool = new ThreadPool(2)) {
      for (int trial = 0; trial < 25; trial++) {
        int n = 1 + r.nextInt(70), cols = 1 + r.nextInt(130), hidden = 1 + r.nextInt(90);
        float[] x = rand(r, n * cols), gate = rand(r, hidden * cols), up = rand(r, hidden * cols);
        float[] y = new float[n * hidden];
        Gemm.swiglu(pool, y, x, n, PackedMatrix.gateUp(gate, up, hidden, cols));
        for (int i = 0; i < n; i++) {
          for (int u = 0; u < hidden; u++) {
            double g = 0, v = 0, mag = 0;
            for (int k = 0; k < cols; k++) {
              g += (double) x[i * cols + k] * gate[u * cols + k];
              v += (double) x[i * cols + k] * up[u * cols + k];
              mag += Math.abs((double) x[i * cols + k] * gate[u * cols + k]) + Math.abs((double) x[i * cols + k] * up[u * cols + k]);
            }
            double want = g / (1 + Math.exp(-g)) * v;
            assertEquals(want, y[i * hidden + u], 1e-5 * (1 + mag * mag), "n=" + n + " cols=" + cols + " hidden=" + hidden);
          }
        }
      }
    }
  }

  @Test
  void aRowsResultDependsOnNeitherItsNeighboursNorTheThreads() {
    Random r = new Random(13);
    try (ThreadPool one = new ThreadPool(1); ThreadPool three = new ThreadPool(3)) {
      for (int trial = 0; trial < 12; trial++) {
        int n = 2 + r.nextInt(150), cols = 1 + r.nextInt(trial % 2 == 0 ? 200 : 450), rows = 1 + r.nextInt(150); // odd trials past a K slice
        float[] x = rand(r, n * cols);
        PackedMatrix w = PackedMatrix.pack(rand(r, rows * cols), rows, cols, trial % 3 == 0 ? rand(r, rows) : null);
        PackedMatrix gu = PackedMatrix.gateUp(rand(r, rows * cols), rand(r, rows * cols), rows, cols);
        float[] all = new float[n * rows], allOne = new float[n * rows], glu = new float[n * rows], row = new float[rows];
        Gemm.matmul(three, all, x, n, w);
        Gemm.matmul(one, allOne, x, n, w);
        Gemm.swiglu(three, glu, x, n, gu);
        assertArrayEquals(allOne, all, "1 thread vs 3");
        for (int i = 0; i < n; i++) {
          float[] xi = Arrays.copyOfRange(x, i * cols, (i + 1) * cols);
          Gemm.matmul(three, row, xi, 1, w);
          assertArrayEquals(Arrays.copyOfRange(all, i * rows, (i + 1) * rows), row, "row " + i + " of " + n);
          Gemm.swiglu(one, row, xi, 1, gu);
          assertArrayEquals(Arrays.copyOfRange(glu, i * rows, (i + 1) * rows), row, "swiglu row " + i + " of " + n);
        }
      }
    }
  }

  @Test
  void scalarTilesComputeTheVectorTilesBits() { // and the packed tiles theirs
    Random r = new Random(14);
    int nr = Tiles.NR;
    for (int trial = 0; trial < 60; trial++) {
      int rows = 1 + r.nextInt(20), k = 1 + r.nextInt(trial % 4 == 3 ? 600 : 90), cols = 1 + r.nextInt(nr); // past a K slice too
      int mode = new int[] {Tiles.STORE, Tiles.ADD, Tiles.BIAS, Tiles.SWIGLU, Tiles.ACCUMULATE}[trial % 5];
      if (mode == Tiles.SWIGLU) cols = Math.min(cols, nr / 2);
      if (mode == Tiles.ACCUMULATE) cols = nr;
      // A's stride: k, or attention's KEY_TILE (the 8-row tiles' constant stride) where k fits in it
      int lda = trial % 3 == 0 && k <= TiledAttention.KEY_TILE ? TiledAttention.KEY_TILE : k;
      float[] a = rand(r, rows * lda), b = rand(r, k * nr), aux = rand(r, nr), c0 = rand(r, rows * nr);
      float[] vec = c0.clone(), sca = c0.clone();
      String where = "mode " + mode + " rows " + rows + " k " + k + " lda " + lda + " cols " + cols;
      Tiles.tile(rows, a, 0, lda, b, 0, k, vec, 0, nr, cols, mode, aux, 0, new float[Tiles.SCRATCH]);
      ScalarTiles.tile(rows, a, 0, lda, b, 0, k, sca, 0, nr, cols, mode, aux, 0);
      assertArrayEquals(sca, vec, where);
      if (mode == Tiles.ACCUMULATE) continue;
      // the same rows packed (from an offset), through the packed tiles: the same chains, the same bits
      float[] ap = new float[7 + rows * k], packed = c0.clone();
      float[] block = new float[rows * k];
      Tiles.packRows(rows, a, 0, lda, k, block);
      System.arraycopy(block, 0, ap, 7, rows * k);
      Tiles.packedTile(rows, ap, 7, b, 0, k, packed, 0, nr, cols, mode, aux, 0, new float[rows * nr]);
      assertArrayEquals(sca, packed, "packed, " + where);
      float[] scaPacked = c0.clone();
      ScalarTiles.packedTile(rows, ap, 7, b, 0, k, scaPacked, 0, nr, cols, mode, aux, 0);
      assertArrayEquals(sca, scaPacked, "scalar packed, " + where);
    }
  }

  @Test
  void exp2IsWithinTwoUlpOfTheTruth() {
    for (double x = -125.9; x < 127; x += 0.0137) {
      double want = Math.pow(2, x);
      float got = ScalarTiles.exp2((float) x);
      double exact = Math.pow(2, (float) x); // the float argument's true value
      assertTrue(Math.abs(got - exact) <= 2.5e-7 * exact, x + ": " + got + " vs " + exact + " (" + want + ")");
    }
    assertEquals(0f, ScalarTiles.exp2(Float.NEGATIVE_INFINITY));
    assertEquals(0f, ScalarTiles.exp2(-126.5f));
    assertTrue(Float.isNaN(ScalarTiles.exp2(Float.NaN)));
    assertTrue(Float.isFinite(ScalarTiles.exp2(1000f)));
    for (double x = -80; x < 80; x += 0.37) {
      // x · log2 e rounds: the argument's relative error 6e-8 becomes |x| · 6e-8 of the result
      assertEquals(Math.exp((float) x), ScalarTiles.exp((float) x), (3e-7 + 1e-7 * Math.abs(x)) * Math.exp((float) x), "e^" + x);
    }
  }

  private static float[] rand(Random r, int n) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) a[i] = (float) r.nextGaussian();
    return a;
  }
}
