package io.longsieve.cpu.kernels;

/**
 * The inner kernels of the fast CPU paths ({@link Gemm}, {@link TiledAttention}) behind one
 * contract with two implementations: {@link VectorTiles} (Vector API) when jdk.incubator.vector is
 * present, {@link ScalarTiles} otherwise. Shapes are fixed by the panel width {@link #NR}.
 *
 * <p>{@code tile}: C(rows, cols) (mode)= A(rows, k) · B(k, NR), cols ≤ NR. A is row-major from
 * a[ao] with row stride lda; B is a packed panel from b[bo], k rows of NR contiguous values; C
 * starts at c[co] with row stride ldc. Every element is one fused multiply-add chain over k in
 * ascending order starting from zero, whatever the number of rows, so a row computed alone
 * (decode) and the same row in a block of rows (prefill, batched decode) have the same bits.
 * Modes: {@link #STORE} c = acc; {@link #ADD} c = c + acc (a residual stream); {@link #BIAS}
 * c = acc + aux[auxo + col] (aux padded to NR); {@link #SWIGLU} the panel's first NR/2 columns
 * are gate units and the next NR/2 the same units' up projection ({@link PackedMatrix#gateUp}),
 * c[col] = silu(gate)·up for col &lt; cols ≤ NR/2; {@link #ACCUMULATE} (full width only): the chain
 * starts from c instead of zero (an attention tile's running output).
 */
final class Tiles {
  private Tiles() {}

  static final int STORE = 0, ADD = 1, BIAS = 2, SWIGLU = 3, ACCUMULATE = 4;

  /** Columns of a packed panel: two vectors (the scalar path keeps the same layout at 16). */
  static final int NR = CpuOps.VECTOR ? VectorTiles.NR : 16;

  /** scratch: at least {@link #SCRATCH} floats of the caller's, for the epilogues. */
  static void tile(int rows, float[] a, int ao, int lda, float[] b, int bo, int k, float[] c, int co, int ldc,
                   int cols, int mode, float[] aux, int auxo, float[] scratch) {
    if (CpuOps.VECTOR) VectorTiles.tile(rows, a, ao, lda, b, bo, k, c, co, ldc, cols, mode, aux, auxo, scratch);
    else ScalarTiles.tile(rows, a, ao, lda, b, bo, k, c, co, ldc, cols, mode, aux, auxo);
  }

  /** Size of a tile's scratch. */
  static final int SCRATCH = 8 * NR;

  /** Rows of the tallest register tile: the height of a packed block's full groups. */
  static final int MR = CpuOps.VECTOR ? VectorTiles.MR : 8;

  /**
   * Height of the group of rows that starts at row r of a packed block of {@code rows}: MR while MR
   * rows remain, then 4, 2 and 1 (the tile heights, in the order {@link #packedTile} takes them).
   */
  static int groupHeight(int rows, int r) {
    int left = rows - r;
    return left >= MR ? MR : left >= 4 ? 4 : left >= 2 ? 2 : 1;
  }

  /**
   * Packs A(rows, k) (row-major from a[ao], row stride lda) for {@link #packedTile}: the rows in
   * groups ({@link #groupHeight}), the group at row r from ap[r · k], k in order, its h rows side by
   * side: ap[r · k + i · h + t] = A[r + t][i]. A tile then reads its rows' values at one k from
   * consecutive floats (one pointer, no stride), which the tile loops need to reach the FMA units'
   * rate: with a pointer per row, C2's address arithmetic takes the ports the FMAs use.
   */
  static void packRows(int rows, float[] a, int ao, int lda, int k, float[] ap) {
    for (int r = 0; r < rows; ) {
      int h = groupHeight(rows, r), base = r * k;
      for (int t = 0; t < h; t++) {
        for (int i = 0, src = ao + (r + t) * lda, dst = base + t; i < k; i++, dst += h) ap[dst] = a[src + i];
      }
      r += h;
    }
  }

  /**
   * {@link #tile} with A packed by {@link #packRows} (its block from ap[apo]): the same fma chains,
   * so the same bits. Modes as {@link #tile} but {@link #ACCUMULATE}; scratch: rows · NR floats
   * (unused, may be null, in {@link #STORE} mode at full width).
   */
  static void packedTile(int rows, float[] ap, int apo, float[] b, int bo, int k, float[] c, int co, int ldc,
                         int cols, int mode, float[] aux, int auxo, float[] scratch) {
    if (CpuOps.VECTOR) VectorPackedTiles.packedTile(rows, ap, apo, b, bo, k, c, co, ldc, cols, mode, aux, auxo, scratch);
    else ScalarTiles.packedTile(rows, ap, apo, b, bo, k, c, co, ldc, cols, mode, aux, auxo);
  }

  /**
   * Scores without packing, for a few rows (decode): s[r · lds + col] = q_r · key(col) for r &lt; rows
   * and col in [c0, c1), q_r = q[qo + r · d ..+ d), key(col) = keys[ko[col] ..+ d). Each dot product is
   * one vector chain over d, reduced across lanes, then the tail.
   */
  static void scores(int rows, float[] q, int qo, int d, float[] keys, int[] ko, int c0, int c1, float[] s, int lds) {
    if (CpuOps.VECTOR) {
      VectorTiles.scores(rows, q, qo, d, keys, ko, c0, c1, s, lds);
      return;
    }
    for (int col = c0; col < c1; col++) {
      for (int r = 0; r < rows; r++) {
        float acc = 0;
        for (int e = 0; e < d; e++) acc = Math.fma(q[qo + r * d + e], keys[ko[col] + e], acc);
        s[r * lds + col] = acc;
      }
    }
  }

  /**
   * How far (log2 units) a tile's scores may rise above a row's running max before the max moves:
   * within it the old max stays (probabilities up to 2^SLACK, far from overflow), which spares most
   * tiles the max reduction and the rescale of the row's output.
   */
  static final float SLACK = 8f;

  /** Floats of running sum per row ({@code l} of {@link #softmaxStep}): one per vector lane. */
  static final int LANES = CpuOps.VECTOR ? VectorTiles.L : 1;

  /**
   * One online-softmax step of row r over its KEY_TILE scores s[so ..) in log2 units (the query
   * carries log2 e; entries the row must not see are −∞). The running max m[r] moves up to the
   * tile's max when a score exceeds it by more than {@link #SLACK}; the scores become 2^(s − m[r]),
   * their sum goes into the row's lane sums l[r · LANES ..), and the row's unnormalised output
   * o[oo .. oo+width) and lane sums are rescaled when the max moved. Returns false, with the scores
   * zeroed, when the row has seen nothing so far and sees nothing in this tile.
   */
  static boolean softmaxStep(float[] s, int so, float[] m, float[] l, int r, float[] o, int oo, int width) {
    return CpuOps.VECTOR ? VectorTiles.softmaxStep(s, so, m, l, r, o, oo, width)
        : ScalarTiles.softmaxStep(s, so, m, l, r, o, oo, width);
  }

  /**
   * Whether every one of {@code rows} rows (row r0 + t's KEY_TILE scores from s[so + t · KEY_TILE])
   * has seen something before and stays within {@link #SLACK} of its running max: then no row's max
   * moves and each takes {@link #softmaxKeep}. One check for a block of rows: a prefill row's max
   * settles within its first tiles, so after them nearly every block passes.
   */
  static boolean rowsStayBelow(float[] s, int so, int rows, float[] m, int r0) {
    return CpuOps.VECTOR ? VectorTiles.rowsStayBelow(s, so, rows, m, r0) : ScalarTiles.rowsStayBelow(s, so, rows, m, r0);
  }

  /**
   * {@link #softmaxStep} for a row whose max stays (checked by {@link #rowsStayBelow}): the scores
   * become 2^(s − m[r]) and their sum goes into the lane sums, the same operations, so the same bits.
   */
  static void softmaxKeep(float[] s, int so, float[] m, float[] l, int r) {
    if (CpuOps.VECTOR) VectorTiles.softmaxKeep(s, so, m, l, r);
    else ScalarTiles.softmaxKeep(s, so, m, l, r);
  }

  /** Row r's running sum from its lane sums. */
  static float rowSum(float[] l, int r) {
    return CpuOps.VECTOR ? VectorTiles.rowSum(l, r) : l[r];
  }

  /** dst[dO + i] = src[so + i] · f for i &lt; n. */
  static void scale(float[] src, int so, float f, float[] dst, int dO, int n) {
    if (CpuOps.VECTOR) VectorTiles.scale(src, so, f, dst, dO, n);
    else for (int i = 0; i < n; i++) dst[dO + i] = src[so + i] * f;
  }

  /** v[vo + j] += bias[bo + j] for j &lt; n (n a multiple of NR). */
  static void addRow(float[] v, int vo, float[] bias, int bo, int n) {
    if (CpuOps.VECTOR) VectorTiles.addRow(v, vo, bias, bo, n);
    else for (int j = 0; j < n; j++) v[vo + j] += bias[bo + j];
  }
}
