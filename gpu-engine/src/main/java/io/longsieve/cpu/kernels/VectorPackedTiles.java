package io.longsieve.cpu.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link Tiles#packedTile} through the Vector API: {@link VectorTiles}' register tiles with A packed
 * by {@link Tiles#packRows}, so the rows of a tile are read at one k from consecutive floats through
 * one pointer (per k: two vector loads of the panel, one broadcast per row, two FMAs per row), and
 * the panel taken in slices of k that stay in L1 while all the block's rows pass over them.
 */
final class VectorPackedTiles {
  private VectorPackedTiles() {}

  private static final VectorSpecies<Float> S = VectorTiles.S;
  private static final int L = VectorTiles.L, NR = VectorTiles.NR, MR = VectorTiles.MR;

  private static FloatVector init(float[] c, int o, boolean load) {
    return load ? FloatVector.fromArray(S, c, o) : FloatVector.zero(S);
  }

  /** See {@link Tiles#packedTile}. */
  static void packedTile(int rows, float[] ap, int apo, float[] b, int bo, int k, float[] c, int co, int ldc,
                         int cols, int mode, float[] aux, int auxo, float[] scratch) {
    boolean direct = mode == Tiles.STORE && cols == NR;
    float[] t = direct ? c : scratch;
    int to = direct ? co : 0, ldt = direct ? ldc : NR;
    for (int k0 = 0; k0 < k; k0 += KC) {
      packedRows(rows, ap, apo, k, k0, Math.min(KC, k - k0), b, bo + k0 * NR, t, to, ldt, k0 > 0);
    }
    if (direct) return;
    for (int r = 0; r < rows; r++) VectorTiles.epilogue(scratch, r * NR, c, co + r * ldc, cols, mode, aux, auxo);
  }

  // depth of a slice of the panel: 192 × NR floats (24 KiB at AVX-512) stay in L1d (48 KiB) while every
  // row group of the block runs over them, instead of the whole panel (cols × NR, 96-256 KiB) being
  // read from L2 once per group. A slice's sums go out and come back in fp32 exactly as they were,
  // so the chain over k is unbroken and the bits do not depend on the slicing.
  private static final int KC = 192;

  /**
   * Rows of T (full NR width) = A · B over k in [k0, k0 + kc), or T + that with load; A packed with
   * depth k from ap[apo] (the group at row r from apo + r · k), B from bo (already at k0).
   */
  private static void packedRows(int rows, float[] ap, int apo, int k, int k0, int kc, float[] b, int bo,
                                 float[] c, int co, int ldc, boolean load) {
    int r = 0;
    if (MR == 8) for (; r + 8 <= rows; r += 8) packed8(ap, apo + r * k + k0 * 8, b, bo, kc, c, co + r * ldc, ldc, load);
    for (; r + 4 <= rows; r += 4) packed4(ap, apo + r * k + k0 * 4, b, bo, kc, c, co + r * ldc, ldc, load);
    for (; r + 2 <= rows; r += 2) packed2(ap, apo + r * k + k0 * 2, b, bo, kc, c, co + r * ldc, ldc, load);
    if (r < rows) VectorTiles.tile1(ap, apo + r * k + k0, b, bo, kc, c, co + r * ldc, load); // one row: packed as it was
  }

  private static void packed8(float[] ap, int ao, float[] b, int bo, int k, float[] c, int co, int ldc,
                              boolean load) {
    FloatVector c00 = init(c, co, load), c01 = init(c, co + L, load);
    FloatVector c10 = init(c, co + ldc, load), c11 = init(c, co + ldc + L, load);
    FloatVector c20 = init(c, co + 2 * ldc, load), c21 = init(c, co + 2 * ldc + L, load);
    FloatVector c30 = init(c, co + 3 * ldc, load), c31 = init(c, co + 3 * ldc + L, load);
    FloatVector c40 = init(c, co + 4 * ldc, load), c41 = init(c, co + 4 * ldc + L, load);
    FloatVector c50 = init(c, co + 5 * ldc, load), c51 = init(c, co + 5 * ldc + L, load);
    FloatVector c60 = init(c, co + 6 * ldc, load), c61 = init(c, co + 6 * ldc + L, load);
    FloatVector c70 = init(c, co + 7 * ldc, load), c71 = init(c, co + 7 * ldc + L, load);
    for (int i = 0; i < k; i++) {
      int p = bo + i * NR, q = ao + i * 8; // (indices derived from i: C2 then drops the bounds checks)
      FloatVector b0 = FloatVector.fromArray(S, b, p), b1 = FloatVector.fromArray(S, b, p + L);
      FloatVector x = FloatVector.broadcast(S, ap[q]);
      c00 = x.fma(b0, c00);
      c01 = x.fma(b1, c01);
      x = FloatVector.broadcast(S, ap[q + 1]);
      c10 = x.fma(b0, c10);
      c11 = x.fma(b1, c11);
      x = FloatVector.broadcast(S, ap[q + 2]);
      c20 = x.fma(b0, c20);
      c21 = x.fma(b1, c21);
      x = FloatVector.broadcast(S, ap[q + 3]);
      c30 = x.fma(b0, c30);
      c31 = x.fma(b1, c31);
      x = FloatVector.broadcast(S, ap[q + 4]);
      c40 = x.fma(b0, c40);
      c41 = x.fma(b1, c41);
      x = FloatVector.broadcast(S, ap[q + 5]);
      c50 = x.fma(b0, c50);
      c51 = x.fma(b1, c51);
      x = FloatVector.broadcast(S, ap[q + 6]);
      c60 = x.fma(b0, c60);
      c61 = x.fma(b1, c61);
      x = FloatVector.broadcast(S, ap[q + 7]);
      c70 = x.fma(b0, c70);
      c71 = x.fma(b1, c71);
    }
    c00.intoArray(c, co);
    c01.intoArray(c, co + L);
    c10.intoArray(c, co + ldc);
    c11.intoArray(c, co + ldc + L);
    c20.intoArray(c, co + 2 * ldc);
    c21.intoArray(c, co + 2 * ldc + L);
    c30.intoArray(c, co + 3 * ldc);
    c31.intoArray(c, co + 3 * ldc + L);
    c40.intoArray(c, co + 4 * ldc);
    c41.intoArray(c, co + 4 * ldc + L);
    c50.intoArray(c, co + 5 * ldc);
    c51.intoArray(c, co + 5 * ldc + L);
    c60.intoArray(c, co + 6 * ldc);
    c61.intoArray(c, co + 6 * ldc + L);
    c70.intoArray(c, co + 7 * ldc);
    c71.intoArray(c, co + 7 * ldc + L);
  }

  private static void packed4(float[] ap, int ao, float[] b, int bo, int k, float[] c, int co, int ldc,
                              boolean load) {
    FloatVector c00 = init(c, co, load), c01 = init(c, co + L, load);
    FloatVector c10 = init(c, co + ldc, load), c11 = init(c, co + ldc + L, load);
    FloatVector c20 = init(c, co + 2 * ldc, load), c21 = init(c, co + 2 * ldc + L, load);
    FloatVector c30 = init(c, co + 3 * ldc, load), c31 = init(c, co + 3 * ldc + L, load);
    for (int i = 0; i < k; i++) {
      int p = bo + i * NR, q = ao + i * 4; // (indices derived from i: C2 then drops the bounds checks)
      FloatVector b0 = FloatVector.fromArray(S, b, p), b1 = FloatVector.fromArray(S, b, p + L);
      FloatVector x = FloatVector.broadcast(S, ap[q]);
      c00 = x.fma(b0, c00);
      c01 = x.fma(b1, c01);
      x = FloatVector.broadcast(S, ap[q + 1]);
      c10 = x.fma(b0, c10);
      c11 = x.fma(b1, c11);
      x = FloatVector.broadcast(S, ap[q + 2]);
      c20 = x.fma(b0, c20);
      c21 = x.fma(b1, c21);
      x = FloatVector.broadcast(S, ap[q + 3]);
      c30 = x.fma(b0, c30);
      c31 = x.fma(b1, c31);
    }
    c00.intoArray(c, co);
    c01.intoArray(c, co + L);
    c10.intoArray(c, co + ldc);
    c11.intoArray(c, co + ldc + L);
    c20.intoArray(c, co + 2 * ldc);
    c21.intoArray(c, co + 2 * ldc + L);
    c30.intoArray(c, co + 3 * ldc);
    c31.intoArray(c, co + 3 * ldc + L);
  }

  private static void packed2(float[] ap, int ao, float[] b, int bo, int k, float[] c, int co, int ldc,
                              boolean load) {
    FloatVector c00 = init(c, co, load), c01 = init(c, co + L, load);
    FloatVector c10 = init(c, co + ldc, load), c11 = init(c, co + ldc + L, load);
    for (int i = 0; i < k; i++) {
      int p = bo + i * NR, q = ao + i * 2; // (indices derived from i: C2 then drops the bounds checks)
      FloatVector b0 = FloatVector.fromArray(S, b, p), b1 = FloatVector.fromArray(S, b, p + L);
      FloatVector x = FloatVector.broadcast(S, ap[q]);
      c00 = x.fma(b0, c00);
      c01 = x.fma(b1, c01);
      x = FloatVector.broadcast(S, ap[q + 1]);
      c10 = x.fma(b0, c10);
      c11 = x.fma(b1, c11);
    }
    c00.intoArray(c, co);
    c01.intoArray(c, co + L);
    c10.intoArray(c, co + ldc);
    c11.intoArray(c, co + ldc + L);
  }
}
