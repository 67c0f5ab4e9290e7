package io.longsieve.cpu.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link Tiles#packedTile} through the Vector API: {@link VectorTiles}' register tiles with A packed
 * by {@link Tiles#packRows}, so the rows of a tile are read at one k from consecutive floats through
 * one pointer (per k: two vector loads of the panel, one broadcast per row, two FMAs per row).
 */
final class VectorPackedTiles {
  private VectorPackedTiles() {}

  private static final VectorSpecies<Float> S = VectorTiles.S;
  private static final int L = VectorTiles.L, NR = VectorTiles.NR, MR = VectorTiles.MR;

  /** See {@link Tiles#packedTile}. */
  static void packedTile(int rows, float[] ap, int apo, float[] b, int bo, int k, float[] c, int co, int ldc,
                         int cols, int mode, float[] aux, int auxo, float[] scratch) {
    if (mode == Tiles.STORE && cols == NR) {
      packedRows(rows, ap, apo, b, bo, k, c, co, ldc);
      return;
    }
    for (int r0 = 0; r0 < rows; r0 += MR) { // the epilogues on a copy, as in tile
      int m = Math.min(MR, rows - r0);
      packedRows(m, ap, apo + r0 * k, b, bo, k, scratch, 0, NR);
      for (int r = 0; r < m; r++) VectorTiles.epilogue(scratch, r * NR, c, co + (r0 + r) * ldc, cols, mode, aux, auxo);
    }
  }

  /**
   * Rows of C (full NR width) = A · B, A packed by {@link Tiles#packRows} from ap[apo] (the group at
   * row r from apo + r · k): tiles of 8, 4, 2 and 1 rows, the packed block's groups.
   */
  private static void packedRows(int rows, float[] ap, int apo, float[] b, int bo, int k, float[] c, int co, int ldc) {
    int r = 0;
    if (MR == 8) for (; r + 8 <= rows; r += 8) packed8(ap, apo + r * k, b, bo, k, c, co + r * ldc, ldc);
    for (; r + 4 <= rows; r += 4) packed4(ap, apo + r * k, b, bo, k, c, co + r * ldc, ldc);
    for (; r + 2 <= rows; r += 2) packed2(ap, apo + r * k, b, bo, k, c, co + r * ldc, ldc);
    if (r < rows) VectorTiles.tile1(ap, apo + r * k, b, bo, k, c, co + r * ldc, false); // one row packed is the row itself
  }

  private static void packed8(float[] ap, int ao, float[] b, int bo, int k, float[] c, int co, int ldc) {
    FloatVector c00 = FloatVector.zero(S), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    FloatVector c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
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

  private static void packed4(float[] ap, int ao, float[] b, int bo, int k, float[] c, int co, int ldc) {
    FloatVector c00 = FloatVector.zero(S), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
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

  private static void packed2(float[] ap, int ao, float[] b, int bo, int k, float[] c, int co, int ldc) {
    FloatVector c00 = FloatVector.zero(S), c01 = c00, c10 = c00, c11 = c00;
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
