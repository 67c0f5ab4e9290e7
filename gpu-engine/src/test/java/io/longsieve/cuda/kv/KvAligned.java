package io.longsieve.cuda.kv;

import io.longsieve.cpu.kernels.KvCache;

/**
 * One layer of a compressed CPU KvCache and a compressed PagedKvCache aligned by original token
 * position per KV head (the GPU side's positions from its recorded keep lists, tokens appended
 * after the compression following them), for tests: the pairs of slots holding the same token,
 * whether that pair's merged content is comparable, and the rows that are not (kept on one side
 * only, or merged from different sets).
 */
public final class KvAligned {
  public final int[][] cpuSlot, gpuSlot;  // (nKv) → the common positions' slots, ascending
  public final boolean[][] stable;        // (nKv) → per common pair: merged from the same tokens on both sides
  public final boolean[][] cpuOdd, gpuOdd;  // (nKv, slots) rows kept on that side only, or unstable
  public final int[] common;              // (nKv) positions kept by both

  private KvAligned(int nKv, int n) {
    cpuSlot = new int[nKv][];
    gpuSlot = new int[nKv][];
    stable = new boolean[nKv][];
    cpuOdd = new boolean[nKv][n];
    gpuOdd = new boolean[nKv][n];
    common = new int[nKv];
  }

  /**
   * @param gpuKeep  (nKv) → positions the GPU kept at the compression, ascending (slots 0..)
   * @param total    the prompt length: tokens at slots past the keep list hold positions total, total + 1, ...
   * @param unstable (nKv) → (total) positions whose merged content may differ (KvKeepModel.mergeUnstable), or null
   */
  public static KvAligned of(KvCache cpu, int layer, int[][] gpuKeep, int total, boolean[][] unstable) {
    int nKv = cpu.nKvHeads(), n = cpu.length(layer);
    KvAligned a = new KvAligned(nKv, n);
    for (int g = 0; g < nKv; g++) {
      int[] cs = new int[n], gs = new int[n];
      boolean[] st = new boolean[n];
      int m = 0, i = 0, j = 0, keep = gpuKeep[g].length;
      while (i < n || j < n) {
        int pc = i < n ? cpu.position(layer, i, g) : Integer.MAX_VALUE;
        int pg = j < n ? (j < keep ? gpuKeep[g][j] : total + j - keep) : Integer.MAX_VALUE;
        if (pc == pg) {
          boolean ok = unstable == null || pc >= total || !unstable[g][pc];
          cs[m] = i;
          gs[m] = j;
          st[m++] = ok;
          a.cpuOdd[g][i++] = !ok;
          a.gpuOdd[g][j++] = !ok;
        } else if (pc < pg) {
          a.cpuOdd[g][i++] = true;
        } else {
          a.gpuOdd[g][j++] = true;
        }
      }
      a.cpuSlot[g] = java.util.Arrays.copyOf(cs, m);
      a.gpuSlot[g] = java.util.Arrays.copyOf(gs, m);
      a.stable[g] = java.util.Arrays.copyOf(st, m);
      a.common[g] = m;
    }
    return a;
  }

  /** The GPU's positions of KV head g for its n slots. */
  static int[] gpuPositions(int[] keep, int total, int n) {
    int[] p = new int[n];
    for (int s = 0; s < n; s++) p[s] = s < keep.length ? keep[s] : total + s - keep.length;
    return p;
  }

  /** The CPU's positions of KV head g. */
  public static int[] cpuPositions(KvCache cpu, int layer, int g) {
    int[] p = new int[cpu.length(layer)];
    for (int s = 0; s < p.length; s++) p[s] = cpu.position(layer, s, g);
    return p;
  }

  /**
   * {softmax mass of query head h on the odd rows, largest ‖v‖ among them} over one side's n slots;
   * bias (slots, heads) or null.
   */
  public static double[] oddMass(float[] q, int h, int d, double scale, float[] kRope, float[] v, float[] bias,
                                  int kvh, int heads, int kvDim, int n, boolean[] odd) {
    double[] x = new double[n];
    double max = Double.NEGATIVE_INFINITY;
    for (int j = 0; j < n; j++) {
      double dot = 0;
      for (int e = 0; e < d; e++) dot += (double) q[h * d + e] * kRope[j * kvDim + kvh * d + e];
      x[j] = dot * scale + (bias == null ? 0 : bias[j * heads + h]);
      max = Math.max(max, x[j]);
    }
    double z = 0, m = 0, vmax = 0;
    for (int j = 0; j < n; j++) {
      double p = Math.exp(x[j] - max);
      z += p;
      if (!odd[j]) continue;
      m += p;
      double vn = 0;
      for (int e = 0; e < d; e++) vn += (double) v[j * kvDim + kvh * d + e] * v[j * kvDim + kvh * d + e];
      vmax = Math.max(vmax, Math.sqrt(vn));
    }
    return new double[] {m / z, vmax};
  }
}
