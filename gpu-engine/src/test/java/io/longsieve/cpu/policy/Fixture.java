package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.model.RopeScaling;
import java.util.List;
import java.util.Random;

/**
 * Small random attention problems for policy tests: a model shape (4 query heads, 2 KV heads,
 * head dim 8 unless told otherwise), a cache filled with random keys and values at positions
 * 0 .. n-1, and random queries. Plus brute-force references written from the definitions, in fp64.
 */
final class Fixture implements AutoCloseable {

  final ModelConfig c;
  final Rope rope;
  final ThreadPool pool;
  final AttentionContext ctx;
  final Random r;

  Fixture(int layers, int heads, int kvHeads, int headDim, long seed) {
    c = new ModelConfig("llama", heads * headDim, 16, layers, heads, kvHeads, headDim, 32, 1e-5, 10000.0,
        RopeScaling.NONE, 1 << 16, false, false, 0, -1, List.of());
    rope = new Rope(c);
    pool = new ThreadPool(2);
    ctx = new AttentionContext(c, rope, pool);
    r = new Random(seed);
  }

  Fixture(long seed) {
    this(2, 4, 2, 8, seed);
  }

  float[] rand(int n) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) a[i] = (float) r.nextGaussian();
    return a;
  }

  /** A cache of the given capacity with n random tokens in every layer. */
  KvCache cache(int capacity, int n) {
    KvCache kv = new KvCache(c, rope, capacity);
    for (int l = 0; l < c.numLayers(); l++) kv.append(l, rand(n * c.kvDim()), 0, rand(n * c.kvDim()), 0, n, 0);
    return kv;
  }

  /** Appends n random tokens to every layer at positions pos0 ... */
  void append(KvCache kv, int n, int pos0) {
    for (int l = 0; l < c.numLayers(); l++) kv.append(l, rand(n * c.kvDim()), 0, rand(n * c.kvDim()), 0, n, pos0);
  }

  float[] rotated(float[] v, int off, int pos) {
    float[] x = java.util.Arrays.copyOfRange(v, off, off + c.headDim());
    rope.rotate(x, 0, 1, pos);
    return x;
  }

  /**
   * Reference attention of query head h: q (pre-RoPE, head h of row) rotated at qpos, keys of KV
   * head h / group at the given slots rotated at keyPos[i] from the pre-RoPE cache, h's bias
   * included; fp64.
   */
  double[] reference(KvCache kv, int layer, float[] q, int qOff, int qpos, int h, int[] slots, int[] keyPos) {
    int d = c.headDim(), kvh = h / c.group();
    float[] qr = rotated(q, qOff, qpos);
    double[] s = new double[slots.length];
    double max = Double.NEGATIVE_INFINITY;
    for (int i = 0; i < slots.length; i++) {
      float[] k = rotated(kv.keys[layer], slots[i] * c.kvDim() + kvh * d, keyPos[i]);
      double v = 0;
      for (int e = 0; e < d; e++) v += (double) qr[e] * k[e];
      v /= Math.sqrt(d);
      if (kv.logitBias[layer] != null) v += kv.logitBias[layer][slots[i] * c.numHeads() + h];
      s[i] = v;
      max = Math.max(max, v);
    }
    double z = 0;
    for (int i = 0; i < s.length; i++) z += s[i] = Math.exp(s[i] - max);
    double[] out = new double[d];
    for (int i = 0; i < slots.length; i++) {
      for (int e = 0; e < d; e++) out[e] += s[i] / z * kv.values[layer][slots[i] * c.kvDim() + kvh * d + e];
    }
    return out;
  }

  /** Largest |a − b| relative to the largest |b|. */
  static double relErr(float[] a, float[] b) {
    double err = 0, scale = 1e-12;
    for (int i = 0; i < a.length; i++) {
      err = Math.max(err, Math.abs(a[i] - b[i]));
      scale = Math.max(scale, Math.abs(b[i]));
    }
    return err / scale;
  }

  static double relErr(float[] a, int off, double[] b) {
    double err = 0, scale = 1e-12;
    for (int i = 0; i < b.length; i++) {
      err = Math.max(err, Math.abs(a[off + i] - b[i]));
      scale = Math.max(scale, Math.abs(b[i]));
    }
    return err / scale;
  }

  static int[] range(int from, int to) {
    int[] a = new int[to - from];
    for (int i = 0; i < a.length; i++) a[i] = from + i;
    return a;
  }

  @Override
  public void close() {
    pool.close();
  }
}
