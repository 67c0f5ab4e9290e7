package io.longsieve.cpu.kernels;

import java.util.Arrays;

/**
 * One thread's share of {@link TiledAttention}: the rows of a task (positions × heads of one
 * group), their running softmax state, and the walk over the key tiles. Buffers grow on demand and
 * stay with the thread (attention runs per layer and step on every worker).
 */
final class TileWorkspace {
  private static final ThreadLocal<TileWorkspace> LOCAL = ThreadLocal.withInitial(TileWorkspace::new);
  private static final int KT = TiledAttention.KEY_TILE;
  private static final int BLOCK = 8; // rows whose scores are computed together

  private int rows, heads, positions, d, dPad;
  private float[] q = new float[0];     // (rows, d) queries, rotated and scaled; row r = position r / heads, head r % heads
  private float[] qp = new float[0];    // (rows, d) the same packed for the score tiles (Tiles.packRows), prefill
  private float[] o = new float[0];     // (rows, dPad) unnormalised outputs
  private float[] m = new float[0];     // (rows) running max of the scores (log2 units)
  private float[] l = new float[0];     // (rows, LANES) running sums of 2^(score − max), per vector lane
  private int[] from = new int[0];      // (positions) first entry seen
  private int[] to = new int[0];        // (positions) one past the last entry seen
  private float[] vp = new float[0];    // (dPad / NR, KT, NR) one value tile (decode)
  private final float[] s = new float[BLOCK * KT];  // (BLOCK, KT) scores, then probabilities, of a row block
  private float[] biasTile = new float[0];           // (heads, KT) logit bias of a tile's entries times log2 e (decode)
  private final int[] keyAt = new int[KT];          // (KT) where each entry's key starts (decode)

  static int padded(int d) {
    return (d + Tiles.NR - 1) / Tiles.NR * Tiles.NR;
  }

  static TileWorkspace get(int positions, int heads, int d) {
    TileWorkspace ws = LOCAL.get();
    ws.size(positions, heads, d);
    return ws;
  }

  private void size(int positions, int heads, int d) {
    int dp = padded(d), r = positions * heads;
    if (q.length < r * d) {
      q = new float[r * d];
      qp = new float[r * d];
    }
    if (o.length < r * dp) o = new float[r * dp];
    if (m.length < r) {
      m = new float[r];
      l = new float[r * Tiles.LANES];
    }
    if (from.length < positions) {
      from = new int[positions];
      to = new int[positions];
    }
    if (vp.length < KT * dp) vp = new float[KT * dp];
    if (biasTile.length < heads * KT) biasTile = new float[heads * KT];
    this.rows = r;
    this.heads = heads;
    this.positions = positions;
    this.d = d;
    this.dPad = dp;
  }

  /**
   * Positions [i0, i1) of group g: their queries and the entries they see. The queries are
   * multiplied by the softmax scale and log2 e, so scores come out in log2 units for exp2.
   */
  void queries(TiledAttention.Problem p, int g, int i0, int i1, float scale) {
    float f = scale * ScalarTiles.LOG2E;
    for (int i = i0; i < i1; i++) {
      from[i - i0] = p.from(g, i);
      to[i - i0] = p.to(g, i);
      for (int hh = 0; hh < heads; hh++) {
        int off = ((i - i0) * heads + hh) * d;
        p.query(g, i, hh, q, off);
        Tiles.scale(q, off, f, q, off, d);
      }
    }
    Arrays.fill(m, 0, rows, Float.NEGATIVE_INFINITY);
    Arrays.fill(l, 0, rows * Tiles.LANES, 0f);
    Arrays.fill(o, 0, rows * dPad, 0f);
  }

  /** Every row over the entries it sees, from the call's packed tiles (prefill); o, m, l stay unnormalised. */
  void attendPacked(TiledAttention.PackedTiles pk, int g) {
    int first = Integer.MAX_VALUE, last = Integer.MIN_VALUE;
    for (int i = 0; i < positions; i++) {
      first = Math.min(first, from[i]);
      last = Math.max(last, to[i]);
    }
    int nr = Tiles.NR;
    Tiles.packRows(rows, q, 0, d, d, qp); // blocks of BLOCK rows are whole groups of the packing: BLOCK is a multiple of MR
    if (NativeTiles.enabled) { // the same loop in C
      NativeTiles.attendPacked(rows, heads, d, dPad, first, last, from, to, qp, pk.k, pk.v, pk.bias ? pk.b : null,
          pk.tileOf(g, 0), m, l, o);
      return;
    }
    for (int j0 = first - first % KT; j0 < last; j0 += KT) {
      int jStart = Math.max(j0, first), jEnd = Math.min(last, j0 + KT), t = pk.tileOf(g, j0);
      int c0 = (jStart - j0) / nr, c1 = (jEnd - j0 + nr - 1) / nr;
      for (int rb = 0; rb < rows; rb += BLOCK) {
        int rn = Math.min(BLOCK, rows - rb);
        if (!blockSees(rb, rn, jStart, jEnd)) continue;
        for (int c = c0; c < c1; c++) {
          Tiles.packedTile(rn, qp, rb * d, pk.k, t * KT * d + c * d * nr, d, s, c * nr, KT, nr, Tiles.STORE, null, 0, null);
        }
        softmaxAndValues(rb, rn, j0, jStart, jEnd, pk.bias ? pk.b : null, t * heads * KT, pk.v, t * KT * dPad);
      }
    }
  }

  /**
   * Every row over the entries it sees within [lo, hi), scores straight from the list's keys and
   * values copied per tile (one position: each key is read once, packing would not pay).
   */
  void attendDirect(KvList list, int lo, int hi) {
    int first = Integer.MAX_VALUE, last = Integer.MIN_VALUE;
    for (int i = 0; i < positions; i++) {
      from[i] = Math.max(from[i], lo);
      to[i] = Math.min(to[i], hi);
      if (from[i] < to[i]) {
        first = Math.min(first, from[i]);
        last = Math.max(last, to[i]);
      }
    }
    if (NativeTiles.enabled) { // the same loop in C
      if (first < last) {
        NativeTiles.attendDirect(rows, heads, d, dPad, first, last, from, to, q, list.keys(), list.keyBase(),
            list.keyStride(), list.keyIdx(), list.keyIdxOff(), list.values(), list.valueBase(), list.valueStride(),
            list.valueIdx(), list.valueIdxOff(), list.bias(), list.biasBase(), list.biasStride(), vp, m, l, o);
      }
      return;
    }
    int nr = Tiles.NR;
    float[] values = list.values(), bias = list.bias();
    for (int j0 = first - first % KT; j0 < last; j0 += KT) {
      int jStart = Math.max(j0, first), jEnd = Math.min(last, j0 + KT);
      for (int j = jStart; j < jEnd; j++) {
        int col = j - j0, vo = list.valueOffset(j);
        keyAt[col] = list.keyOffset(j);
        for (int c = 0; c * nr < d; c++) System.arraycopy(values, vo + c * nr, vp, (c * KT + col) * nr, Math.min(nr, d - c * nr));
        if (bias != null) {
          for (int hh = 0; hh < heads; hh++) biasTile[hh * KT + col] = bias[list.biasOffset(j, hh)] * ScalarTiles.LOG2E;
        }
      }
      for (int rb = 0; rb < rows; rb += BLOCK) {
        int rn = Math.min(BLOCK, rows - rb);
        if (!blockSees(rb, rn, jStart, jEnd)) continue;
        Tiles.scores(rn, q, rb * d, d, list.keys(), keyAt, jStart - j0, jEnd - j0, s, KT);
        softmaxAndValues(rb, rn, j0, jStart, jEnd, bias != null ? biasTile : null, 0, vp, 0);
      }
    }
  }

  private boolean blockSees(int rb, int rn, int jStart, int jEnd) {
    for (int i = rb / heads; i <= (rb + rn - 1) / heads; i++) if (from[i] < jEnd && to[i] > jStart) return true;
    return false;
  }

  /**
   * Rows [rb, rb + rn) with their scores of tile j0 in s: bias (bias from bo: (heads, KT), row r
   * takes its head's), the entries each row must not see
   * masked to −∞, the online-softmax step, then probabilities times the value tile (vt from vo,
   * (dPad / NR, KT, NR)) into the outputs.
   */
  private void softmaxAndValues(int rb, int rn, int j0, int jStart, int jEnd, float[] bias, int bo, float[] vt, int vo) {
    int nr = Tiles.NR, kOff = jStart - j0;
    for (int r = rb; r < rb + rn; r++) {
      int so = (r - rb) * KT, i = r / heads;
      if (bias != null) Tiles.addRow(s, so, bias, bo + (r % heads) * KT, KT);
      int a = Math.min(KT, Math.max(from[i], jStart) - j0), b = Math.max(a, Math.min(to[i], jEnd) - j0); // sees [a, b)
      if (a > 0) Arrays.fill(s, so, so + a, Float.NEGATIVE_INFINITY);
      if (b < KT) Arrays.fill(s, so + b, so + KT, Float.NEGATIVE_INFINITY);
    }
    if (Tiles.rowsStayBelow(s, 0, rn, m, rb)) {
      for (int r = rb; r < rb + rn; r++) Tiles.softmaxKeep(s, (r - rb) * KT, m, l, r);
    } else {
      for (int r = rb; r < rb + rn; r++) Tiles.softmaxStep(s, (r - rb) * KT, m, l, r, o, r * dPad, dPad);
    }
    for (int c = 0; c < dPad / nr; c++) {
      Tiles.tile(rn, s, kOff, KT, vt, vo + (c * KT + kOff) * nr, jEnd - jStart, o, rb * dPad + c * nr, dPad, nr,
          Tiles.ACCUMULATE, null, 0, null);
    }
  }

  /** Normalised outputs of the rows (position i0 + r / heads, head r % heads) into out. */
  void write(TiledAttention.Problem p, int g, int i0, float[] out) {
    for (int r = 0; r < rows; r++) {
      int off = p.outOffset(g, i0 + r / heads, r % heads);
      float sum = Tiles.rowSum(l, r);
      if (sum > 0) Tiles.scale(o, r * dPad, 1f / sum, out, off, d);
      else Arrays.fill(out, off, off + d, 0f);
    }
  }

  /** The rows' unnormalised state into slot t of a split's partial buffers ((task, row, dPad), (task, row)). */
  void keepPartial(float[] partO, float[] partM, float[] partL, int t) {
    System.arraycopy(o, 0, partO, t * rows * dPad, rows * dPad);
    System.arraycopy(m, 0, partM, t * rows, rows);
    for (int r = 0; r < rows; r++) partL[t * rows + r] = Tiles.rowSum(l, r);
  }
}
