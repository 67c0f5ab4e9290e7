package io.longsieve.cpu.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShuffle;
import jdk.incubator.vector.VectorSpecies;

/**
 * The register-tiled inner kernels of {@link Gemm} and {@link TiledAttention} through the Vector
 * API (the {@link Tiles} contract). A tile of MR rows keeps 2·MR accumulators in registers while it
 * walks a packed panel: per k, two vector loads of the panel and one broadcast per row feed 2·MR
 * fused multiply-adds. Only touched when jdk.incubator.vector is present (CpuOps.VECTOR).
 */
final class VectorTiles {
  private VectorTiles() {}

  static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
  static final int L = S.length();
  static final int NR = 2 * L;
  // 8 rows × 2 vectors = 16 accumulators + 3 operands fit AVX-512's 32 registers; AVX2 has 16
  static final int MR = L >= 16 ? 8 : 4;

  /** See {@link Tiles#tile}. */
  static void tile(int rows, float[] a, int ao, int lda, float[] b, int bo, int k, float[] c, int co, int ldc,
                   int cols, int mode, float[] aux, int auxo, float[] scratch) {
    if (mode == Tiles.ACCUMULATE || (mode == Tiles.STORE && cols == NR)) {
      rows(rows, a, ao, lda, b, bo, k, c, co, ldc, mode == Tiles.ACCUMULATE);
      return;
    }
    // the other epilogues run on a copy, which keeps the register loops small enough to be compiled whole
    for (int r0 = 0; r0 < rows; r0 += MR) {
      int m = Math.min(MR, rows - r0);
      rows(m, a, ao + r0 * lda, lda, b, bo, k, scratch, 0, NR, false);
      for (int r = 0; r < m; r++) epilogue(scratch, r * NR, c, co + (r0 + r) * ldc, cols, mode, aux, auxo);
    }
  }

  /**
   * Rows of C (full NR width) = A · B, or C + A · B with load: tiles of 8 rows where A's stride is
   * {@link TiledAttention#KEY_TILE} (attention's probabilities), then 4, 2 and 1.
   */
  private static void rows(int rows, float[] a, int ao, int lda, float[] b, int bo, int k, float[] c, int co, int ldc,
                           boolean load) {
    int r = 0;
    if (MR == 8 && lda == KT) for (; r + 8 <= rows; r += 8) tile8(a, ao + r * KT, b, bo, k, c, co + r * ldc, ldc, load);
    for (; r + 4 <= rows; r += 4) tile4(a, ao + r * lda, lda, b, bo, k, c, co + r * ldc, ldc, load);
    for (; r + 2 <= rows; r += 2) tile2(a, ao + r * lda, lda, b, bo, k, c, co + r * ldc, ldc, load);
    if (r < rows) tile1(a, ao + r * lda, b, bo, k, c, co + r * ldc, load);
  }

  static FloatVector init(float[] c, int o, boolean load) {
    return load ? FloatVector.fromArray(S, c, o) : FloatVector.zero(S);
  }

  private static final int KT = TiledAttention.KEY_TILE;

  /**
   * Eight rows of A with the constant stride KT: the rows' addresses then differ by constants and
   * share one register. With a stride known only at run time C2 keeps eight row offsets in
   * registers and the loop ran at about 70% of this one's rate (other strides pack: {@link Tiles#packRows}).
   */
  private static void tile8(float[] a, int ao, float[] b, int bo, int k, float[] c, int co, int ldc, boolean load) {
    final int lda = KT;
    int o0 = co, o1 = o0 + ldc, o2 = o1 + ldc, o3 = o2 + ldc, o4 = o3 + ldc, o5 = o4 + ldc, o6 = o5 + ldc, o7 = o6 + ldc;
    FloatVector c00 = init(c, o0, load), c01 = init(c, o0 + L, load), c10 = init(c, o1, load), c11 = init(c, o1 + L, load);
    FloatVector c20 = init(c, o2, load), c21 = init(c, o2 + L, load), c30 = init(c, o3, load), c31 = init(c, o3 + L, load);
    FloatVector c40 = init(c, o4, load), c41 = init(c, o4 + L, load), c50 = init(c, o5, load), c51 = init(c, o5 + L, load);
    FloatVector c60 = init(c, o6, load), c61 = init(c, o6 + L, load), c70 = init(c, o7, load), c71 = init(c, o7 + L, load);
    int a0 = ao, a1 = a0 + lda, a2 = a1 + lda, a3 = a2 + lda, a4 = a3 + lda, a5 = a4 + lda, a6 = a5 + lda, a7 = a6 + lda;
    for (int i = 0; i < k; i++) {
      int p = bo + i * NR; // (an index derived from i: C2 then drops the bounds checks)
      FloatVector b0 = FloatVector.fromArray(S, b, p), b1 = FloatVector.fromArray(S, b, p + L);
      FloatVector x = FloatVector.broadcast(S, a[a0 + i]);
      c00 = x.fma(b0, c00);
      c01 = x.fma(b1, c01);
      x = FloatVector.broadcast(S, a[a1 + i]);
      c10 = x.fma(b0, c10);
      c11 = x.fma(b1, c11);
      x = FloatVector.broadcast(S, a[a2 + i]);
      c20 = x.fma(b0, c20);
      c21 = x.fma(b1, c21);
      x = FloatVector.broadcast(S, a[a3 + i]);
      c30 = x.fma(b0, c30);
      c31 = x.fma(b1, c31);
      x = FloatVector.broadcast(S, a[a4 + i]);
      c40 = x.fma(b0, c40);
      c41 = x.fma(b1, c41);
      x = FloatVector.broadcast(S, a[a5 + i]);
      c50 = x.fma(b0, c50);
      c51 = x.fma(b1, c51);
      x = FloatVector.broadcast(S, a[a6 + i]);
      c60 = x.fma(b0, c60);
      c61 = x.fma(b1, c61);
      x = FloatVector.broadcast(S, a[a7 + i]);
      c70 = x.fma(b0, c70);
      c71 = x.fma(b1, c71);
    }
    c00.intoArray(c, o0);
    c01.intoArray(c, o0 + L);
    c10.intoArray(c, o1);
    c11.intoArray(c, o1 + L);
    c20.intoArray(c, o2);
    c21.intoArray(c, o2 + L);
    c30.intoArray(c, o3);
    c31.intoArray(c, o3 + L);
    c40.intoArray(c, o4);
    c41.intoArray(c, o4 + L);
    c50.intoArray(c, o5);
    c51.intoArray(c, o5 + L);
    c60.intoArray(c, o6);
    c61.intoArray(c, o6 + L);
    c70.intoArray(c, o7);
    c71.intoArray(c, o7 + L);
  }

  private static void tile4(float[] a, int ao, int lda, float[] b, int bo, int k, float[] c, int co, int ldc,
                            boolean load) {
    int o0 = co, o1 = o0 + ldc, o2 = o1 + ldc, o3 = o2 + ldc;
    FloatVector c00 = init(c, o0, load), c01 = init(c, o0 + L, load), c10 = init(c, o1, load), c11 = init(c, o1 + L, load);
    FloatVector c20 = init(c, o2, load), c21 = init(c, o2 + L, load), c30 = init(c, o3, load), c31 = init(c, o3 + L, load);
    int a0 = ao, a1 = a0 + lda, a2 = a1 + lda, a3 = a2 + lda;
    for (int i = 0; i < k; i++) {
      int p = bo + i * NR; // (an index derived from i: C2 then drops the bounds checks)
      FloatVector b0 = FloatVector.fromArray(S, b, p), b1 = FloatVector.fromArray(S, b, p + L);
      FloatVector x = FloatVector.broadcast(S, a[a0 + i]);
      c00 = x.fma(b0, c00);
      c01 = x.fma(b1, c01);
      x = FloatVector.broadcast(S, a[a1 + i]);
      c10 = x.fma(b0, c10);
      c11 = x.fma(b1, c11);
      x = FloatVector.broadcast(S, a[a2 + i]);
      c20 = x.fma(b0, c20);
      c21 = x.fma(b1, c21);
      x = FloatVector.broadcast(S, a[a3 + i]);
      c30 = x.fma(b0, c30);
      c31 = x.fma(b1, c31);
    }
    c00.intoArray(c, o0);
    c01.intoArray(c, o0 + L);
    c10.intoArray(c, o1);
    c11.intoArray(c, o1 + L);
    c20.intoArray(c, o2);
    c21.intoArray(c, o2 + L);
    c30.intoArray(c, o3);
    c31.intoArray(c, o3 + L);
  }

  private static void tile2(float[] a, int ao, int lda, float[] b, int bo, int k, float[] c, int co, int ldc,
                            boolean load) {
    int o0 = co, o1 = o0 + ldc;
    FloatVector c00 = init(c, o0, load), c01 = init(c, o0 + L, load), c10 = init(c, o1, load), c11 = init(c, o1 + L, load);
    int a0 = ao, a1 = a0 + lda;
    for (int i = 0; i < k; i++) {
      int p = bo + i * NR; // (an index derived from i: C2 then drops the bounds checks)
      FloatVector b0 = FloatVector.fromArray(S, b, p), b1 = FloatVector.fromArray(S, b, p + L);
      FloatVector x = FloatVector.broadcast(S, a[a0 + i]);
      c00 = x.fma(b0, c00);
      c01 = x.fma(b1, c01);
      x = FloatVector.broadcast(S, a[a1 + i]);
      c10 = x.fma(b0, c10);
      c11 = x.fma(b1, c11);
    }
    c00.intoArray(c, o0);
    c01.intoArray(c, o0 + L);
    c10.intoArray(c, o1);
    c11.intoArray(c, o1 + L);
  }

  static void tile1(float[] a, int ao, float[] b, int bo, int k, float[] c, int co, boolean load) {
    FloatVector c00 = init(c, co, load), c01 = init(c, co + L, load);
    for (int i = 0; i < k; i++) {
      int p = bo + i * NR; // (an index derived from i: C2 then drops the bounds checks)
      FloatVector x = FloatVector.broadcast(S, a[ao + i]);
      c00 = x.fma(FloatVector.fromArray(S, b, p), c00);
      c01 = x.fma(FloatVector.fromArray(S, b, p + L), c01);
    }
    c00.intoArray(c, co);
    c01.intoArray(c, co + L);
  }

  /** One row's products acc[ao .. ao+NR) go to c[o ..) as {@code mode} says (see {@link Tiles}). */
  static void epilogue(float[] acc, int ao, float[] c, int o, int cols, int mode, float[] aux, int auxo) {
    FloatVector v0 = FloatVector.fromArray(S, acc, ao), v1 = FloatVector.fromArray(S, acc, ao + L);
    if (mode == Tiles.SWIGLU) {
      FloatVector g = v0.div(exp2(v0.mul(-ScalarTiles.LOG2E)).add(1f)).mul(v1); // silu(gate) · up = g / (1 + e^-g) · up
      if (cols >= L) g.intoArray(c, o);
      else g.intoArray(c, o, S.indexInRange(0, cols));
      return;
    }
    if (mode == Tiles.BIAS) {
      v0 = v0.add(FloatVector.fromArray(S, aux, auxo));
      v1 = v1.add(FloatVector.fromArray(S, aux, auxo + L));
    }
    if (cols >= NR) {
      if (mode == Tiles.ADD) {
        v0 = FloatVector.fromArray(S, c, o).add(v0);
        v1 = FloatVector.fromArray(S, c, o + L).add(v1);
      }
      v0.intoArray(c, o);
      v1.intoArray(c, o + L);
      return;
    }
    VectorMask<Float> m0 = S.indexInRange(0, cols), m1 = S.indexInRange(L, cols);
    if (mode == Tiles.ADD) {
      v0 = FloatVector.fromArray(S, c, o, m0).add(v0);
      v1 = FloatVector.fromArray(S, c, o + L, m1).add(v1);
    }
    v0.intoArray(c, o, m0);
    v1.intoArray(c, o + L, m1);
  }

  /** See {@link Tiles#scores}. */
  static void scores(int rows, float[] q, int qo, int d, float[] keys, int[] ko, int c0, int c1, float[] s, int lds) {
    int vd = S.loopBound(d);
    for (int col = c0; col < c1; col++) {
      int k = ko[col], r = 0;
      for (; r + 2 <= rows; r += 2) {
        int q0 = qo + r * d, q1 = q0 + d;
        FloatVector a0 = FloatVector.zero(S), a1 = a0;
        for (int e = 0; e < vd; e += L) {
          FloatVector kv = FloatVector.fromArray(S, keys, k + e);
          a0 = FloatVector.fromArray(S, q, q0 + e).fma(kv, a0);
          a1 = FloatVector.fromArray(S, q, q1 + e).fma(kv, a1);
        }
        float s0, s1;
        if (HALVES) { // both sums in one butterfly: row 0 in the low lanes, row 1 in the high ones
          FloatVector t = foldToHalves(a0.blend(a1, HIGH).add(a1.blend(a0, HIGH).rearrange(SWAP_HALVES)));
          s0 = t.lane(0);
          s1 = t.lane(L / 2);
        } else {
          s0 = a0.reduceLanes(VectorOperators.ADD);
          s1 = a1.reduceLanes(VectorOperators.ADD);
        }
        for (int e = vd; e < d; e++) {
          s0 = Math.fma(q[q0 + e], keys[k + e], s0);
          s1 = Math.fma(q[q1 + e], keys[k + e], s1);
        }
        s[r * lds + col] = s0;
        s[(r + 1) * lds + col] = s1;
      }
      if (r < rows) {
        int q0 = qo + r * d;
        FloatVector a0 = FloatVector.zero(S);
        for (int e = 0; e < vd; e += L) a0 = FloatVector.fromArray(S, q, q0 + e).fma(FloatVector.fromArray(S, keys, k + e), a0);
        float s0 = HALVES ? foldToHalves(a0.add(a0.rearrange(SWAP_HALVES))).lane(0) : a0.reduceLanes(VectorOperators.ADD);
        for (int e = vd; e < d; e++) s0 = Math.fma(q[q0 + e], keys[k + e], s0);
        s[r * lds + col] = s0;
      }
    }
  }

  // Horizontal sums by lane swaps (JDK 17 reduces a float vector's lanes one after the other): for
  // 16 or 8 lanes, rearrange + add folds each half of the vector into its first lane.
  private static final boolean HALVES = L == 16 || L == 8;
  private static final VectorMask<Float> HIGH = VectorMask.fromLong(S, ((1L << L) - 1) & ~((1L << (L / 2)) - 1));
  private static final VectorShuffle<Float> SWAP_HALVES = VectorShuffle.fromOp(S, i -> i ^ (L / 2));
  private static final VectorShuffle<Float> SWAP4 = VectorShuffle.fromOp(S, i -> i ^ 4);
  private static final VectorShuffle<Float> SWAP2 = VectorShuffle.fromOp(S, i -> i ^ 2);
  private static final VectorShuffle<Float> SWAP1 = VectorShuffle.fromOp(S, i -> i ^ 1);

  /** Each half of t (L/2 lanes, already pair-summed across halves) summed into its first lane. */
  private static FloatVector foldToHalves(FloatVector t) {
    if (L == 16) t = t.add(t.rearrange(SWAP4));
    t = t.add(t.rearrange(SWAP2));
    return t.add(t.rearrange(SWAP1));
  }

  /**
   * See {@link Tiles#rowsStayBelow}. One mask for the whole block and one test at the end: on JDK 17
   * a mask test per row made the check cost as much as the exponentials (8 rows of 64: 217-395 ns,
   * against 32-53 ns with one test).
   */
  static boolean rowsStayBelow(float[] s, int so, int rows, float[] m, int r0) {
    final int n = TiledAttention.KEY_TILE;
    for (int t = 0; t < rows; t++) if (m[r0 + t] == Float.NEGATIVE_INFINITY) return false;
    VectorMask<Float> above = S.maskAll(false);
    for (int t = 0; t < rows; t++) {
      FloatVector limit = FloatVector.broadcast(S, m[r0 + t] + Tiles.SLACK);
      for (int j = 0; j < n; j += L) above = above.or(FloatVector.fromArray(S, s, so + t * n + j).compare(VectorOperators.GT, limit));
    }
    return !above.anyTrue();
  }

  /** See {@link Tiles#softmaxStep}; l holds L lane sums per row. */
  static boolean softmaxStep(float[] s, int so, float[] m, float[] l, int r, float[] o, int oo, int width) {
    final int n = TiledAttention.KEY_TILE; // a constant: the loops unroll and their bounds checks merge
    float mOld = m[r], mNew = mOld;
    boolean exceeds = mOld == Float.NEGATIVE_INFINITY;
    if (!exceeds) {
      FloatVector limit = FloatVector.broadcast(S, mOld + Tiles.SLACK);
      VectorMask<Float> above = FloatVector.fromArray(S, s, so).compare(VectorOperators.GT, limit);
      for (int j = L; j < n; j += L) above = above.or(FloatVector.fromArray(S, s, so + j).compare(VectorOperators.GT, limit));
      exceeds = above.anyTrue();
    }
    if (exceeds) {
      FloatVector mx = FloatVector.fromArray(S, s, so);
      for (int j = L; j < n; j += L) mx = mx.max(FloatVector.fromArray(S, s, so + j));
      float tileMax = mx.reduceLanes(VectorOperators.MAX);
      if (tileMax == Float.NEGATIVE_INFINITY) {
        FloatVector zero = FloatVector.zero(S);
        for (int j = 0; j < n; j += L) zero.intoArray(s, so + j);
        return false;
      }
      mNew = Math.max(mOld, tileMax);
    }
    if (mNew != mOld) {
      FloatVector alpha = FloatVector.broadcast(S, ScalarTiles.exp2(mOld - mNew)); // 0 while the row had seen nothing
      FloatVector.fromArray(S, l, r * L).mul(alpha).intoArray(l, r * L);
      for (int e = 0; e < width; e += L) FloatVector.fromArray(S, o, oo + e).mul(alpha).intoArray(o, oo + e);
      m[r] = mNew;
    }
    softmaxKeep(s, so, m, l, r);
    return true;
  }

  /** See {@link Tiles#softmaxKeep}. */
  static void softmaxKeep(float[] s, int so, float[] m, float[] l, int r) {
    final int n = TiledAttention.KEY_TILE;
    FloatVector shift = FloatVector.broadcast(S, m[r]), sum = FloatVector.zero(S);
    for (int j = 0; j < n; j += L) {
      FloatVector p = exp2Below(FloatVector.fromArray(S, s, so + j).sub(shift));
      p.intoArray(s, so + j);
      sum = sum.add(p);
    }
    FloatVector.fromArray(S, l, r * L).add(sum).intoArray(l, r * L);
  }

  /** The sum of row r's L lane sums. */
  static float rowSum(float[] l, int r) {
    return FloatVector.fromArray(S, l, r * L).reduceLanes(VectorOperators.ADD);
  }

  /** dst[i] = src[i] · f over n values. */
  static void scale(float[] src, int so, float f, float[] dst, int dO, int n) {
    int i = 0;
    for (int upper = S.loopBound(n); i < upper; i += L) {
      FloatVector.fromArray(S, src, so + i).mul(f).intoArray(dst, dO + i);
    }
    for (; i < n; i++) dst[dO + i] = src[so + i] * f;
  }

  /** v[vo + j] += bias[bo + j] for j in [0, n), n a multiple of L. */
  static void addRow(float[] v, int vo, float[] bias, int bo, int n) {
    for (int j = 0; j < n; j += L) {
      FloatVector.fromArray(S, v, vo + j).add(FloatVector.fromArray(S, bias, bo + j)).intoArray(v, vo + j);
    }
  }

  /**
   * 2^x per lane ({@link ScalarTiles#exp2}'s operations, lane by lane): lanes below −126 (−∞
   * included) give 0, lanes above 127 give 2^127 · 2^r. Constants go in as vectors: JDK 17 compiles
   * the scalar-argument forms of min, max and the integer operations less well.
   */
  static FloatVector exp2(FloatVector x) {
    return exp2Below(x.min(FloatVector.broadcast(S, ScalarTiles.EXP2_HI)));
  }

  /** {@link #exp2} for x ≤ 127 (softmax arguments are ≤ 0): no upper clamp. */
  static FloatVector exp2Below(FloatVector x) {
    VectorMask<Float> under = x.compare(VectorOperators.LT, FloatVector.broadcast(S, ScalarTiles.EXP2_LO));
    FloatVector magic = FloatVector.broadcast(S, ScalarTiles.MAGIC);
    FloatVector t = x.add(magic);
    FloatVector r = x.sub(t.sub(magic));
    FloatVector p = r.fma(FloatVector.broadcast(S, ScalarTiles.P0), FloatVector.broadcast(S, ScalarTiles.P1));
    p = p.fma(r, FloatVector.broadcast(S, ScalarTiles.P2));
    p = p.fma(r, FloatVector.broadcast(S, ScalarTiles.P3));
    p = p.fma(r, FloatVector.broadcast(S, ScalarTiles.P4));
    p = p.fma(r, FloatVector.broadcast(S, ScalarTiles.P5));
    FloatVector y = p.fma(r, FloatVector.broadcast(S, 1f));
    // 2^n from the low bits of t: (n + 127) << 23; lanes that underflow are replaced below
    IntVector bits = t.reinterpretAsInts()
        .sub(IntVector.broadcast(IntVector.SPECIES_PREFERRED, ScalarTiles.MAGIC_BITS - 127))
        .lanewise(VectorOperators.LSHL, 23);
    return y.mul(bits.reinterpretAsFloats()).blend(FloatVector.zero(S), under);
  }
}
