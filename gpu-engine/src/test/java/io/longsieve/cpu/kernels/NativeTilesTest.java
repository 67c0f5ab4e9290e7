package io.longsieve.cpu.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Random;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The C kernels (NativeTiles, src/main/c/cpu_tiles.c) compute the Java tiles' bits: every GEMM mode
 * (packed prefill rows and decode rows in place) and TiledAttention's prefill and decode (one position,
 * long lists split in segments), on random odd sizes (row tails, partial panels, k past a slice,
 * head sizes that are not multiples of the vector width, GQA groups, logit biases, lists of slots,
 * windows, rows that see nothing in a tile), with 1 and 2 threads, the library on and then off.
 * Where the build has the library (gcc, Linux x86-64, 512-bit vectors, which CI has), it must load.
 */
class NativeTilesTest {

  @AfterEach
  void restore() {
    NativeTiles.enabled = NativeTiles.AVAILABLE;
  }

  @Test
  void theLibraryLoadsWhereTheBuildHasIt() {
    boolean built = NativeTiles.class.getResource(NativeTiles.RESOURCE) != null;
    boolean usable = CpuOps.VECTOR && Tiles.NR == 32 && !"false".equals(System.getProperty("longsieve.cpu.native"));
    assumeTrue(built && usable, "no library in this build, or vectors narrower than 512 bits: " + NativeTiles.STATE);
    assertEquals("native", NativeTiles.STATE);
  }

  @Test
  void gemmModesHaveTheJavaBits() {
    assumeTrue(NativeTiles.AVAILABLE, NativeTiles.STATE);
    Random r = new Random(41);
    try (ThreadPool one = new ThreadPool(1); ThreadPool two = new ThreadPool(2)) {
      for (int trial = 0; trial < 40; trial++) {
        ThreadPool pool = trial % 2 == 0 ? one : two;
        int n = 1 + r.nextInt(trial < 20 ? 40 : 200), cols = 1 + r.nextInt(trial % 3 == 0 ? 500 : 120);
        int rows = 1 + r.nextInt(trial % 4 == 0 ? 300 : 70);
        float[] x = rand(r, n * cols), base = rand(r, n * rows);
        PackedMatrix plain = PackedMatrix.pack(rand(r, rows * cols), rows, cols, null);
        PackedMatrix biased = PackedMatrix.pack(rand(r, rows * cols), rows, cols, rand(r, rows));
        PackedMatrix gateUp = PackedMatrix.gateUp(rand(r, rows * cols), rand(r, rows * cols), rows, cols);
        String where = "n " + n + " cols " + cols + " rows " + rows + " threads " + pool.threads();
        same(out -> Gemm.matmul(pool, out, x, n, plain), new float[n * rows], "matmul " + where);
        same(out -> Gemm.matmul(pool, out, x, n, biased), new float[n * rows], "bias " + where);
        same(out -> Gemm.matmulAdd(pool, out, x, n, plain), base, "add " + where);
        same(out -> Gemm.swiglu(pool, out, x, n, gateUp), new float[n * rows], "swiglu " + where);
      }
    }
  }

  @Test
  void attentionHasTheJavaBits() {
    assumeTrue(NativeTiles.AVAILABLE, NativeTiles.STATE);
    Random r = new Random(42);
    int[] dims = {8, 18, 24, 40, 64, 72, 128};
    try (ThreadPool one = new ThreadPool(1); ThreadPool two = new ThreadPool(2)) {
      for (int trial = 0; trial < 56; trial++) {
        ThreadPool pool = trial % 2 == 0 ? one : two;
        int groups = 1 + r.nextInt(3), heads = 1 + r.nextInt(trial % 5 == 0 ? 8 : 4), d = dims[trial % dims.length];
        boolean decode = trial % 4 == 3; // one position: scores straight from the list, long lists split in segments
        int cached = decode ? r.nextInt(trial % 8 == 7 ? 5000 : 600) : trial % 4 == 0 ? 0 : r.nextInt(700);
        int n = decode ? 1 : 2 + r.nextInt(trial % 3 == 0 ? 300 : 90);
        int entries = cached + n, window = trial % 6 == 5 ? 1 + r.nextInt(150) : 0;
        boolean bias = trial % 3 == 1, listed = trial % 4 == 2;
        float[] keys = rand(r, groups * entries * d), values = rand(r, groups * entries * d);
        float[] biases = bias ? rand(r, groups * entries * heads) : null;
        for (int i = 0; i < keys.length; i++) keys[i] *= 3; // scores spread enough to move the running max
        int[] slots = new int[entries]; // a list of slots: entry j is slot slots[j], in the cache's order
        for (int j = 0; j < entries; j++) slots[j] = listed ? entries - 1 - j : j;
        float[] q = rand(r, n * groups * heads * d);
        TiledAttention.Problem p = new TiledAttention.Problem() {
          @Override
          public int positions(int g) {
            return g == groups - 1 && groups > 1 ? n / 2 + 1 : n; // the last group with fewer positions
          }

          @Override
          public KvList keys(int g) {
            return new KvList(keys, g * entries * d, d, listed ? slots : null, 0, values, g * entries * d, d,
                listed ? slots : null, 0, biases, g * entries * heads, heads);
          }

          @Override
          public void query(int g, int i, int hh, float[] dst, int off) {
            System.arraycopy(q, ((i * groups + g) * heads + hh) * d, dst, off, d);
          }

          @Override
          public int from(int g, int i) {
            return window == 0 ? 0 : Math.max(0, cached + i + 1 - window);
          }

          @Override
          public int to(int g, int i) {
            return cached + i + 1;
          }

          @Override
          public int outOffset(int g, int i, int hh) {
            return ((i * groups + g) * heads + hh) * d;
          }
        };
        String where = (decode ? "decode " : "prefill ") + "groups " + groups + " heads " + heads + " d " + d + " cached " + cached + " n " + n
            + " window " + window + " bias " + bias + " listed " + listed + " threads " + pool.threads();
        same(out -> TiledAttention.run(pool, new TiledAttention.PackedTiles(), groups, heads, d, 0.125f, p, out),
            new float[q.length], where);
      }
    }
  }

  /** Runs fill on a copy of start with the library, then without it: the same bits. */
  private static void same(Consumer<float[]> fill, float[] start, String where) {
    float[] withC = start.clone(), withJava = start.clone();
    NativeTiles.enabled = true;
    fill.accept(withC);
    NativeTiles.enabled = false;
    fill.accept(withJava);
    NativeTiles.enabled = NativeTiles.AVAILABLE;
    assertArrayEquals(withJava, withC, where);
  }

  private static float[] rand(Random r, int n) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) a[i] = (float) r.nextGaussian();
    return a;
  }
}
