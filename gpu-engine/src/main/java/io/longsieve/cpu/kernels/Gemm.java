package io.longsieve.cpu.kernels;

/**
 * The model's matrix products on the CPU: x (n, cols) times a {@link PackedMatrix}ᵀ, register-tiled
 * ({@link Tiles}). Work is split over threads in blocks of rows (prefill) or, when there are few
 * rows (decode), in groups of weight panels; each task writes its own rows or its own panel
 * columns. Within a task the loop runs panel by panel over all of its rows, so each weight is read
 * from memory once per call whatever the number of rows (a batched decode step reads the weights
 * once for all its sequences). Every output is the same fma chain over the input features for any
 * n and any split, so a row's result never depends on the rows computed with it.
 */
public final class Gemm {
  private Gemm() {}

  private static final int ROW_BLOCK = 64;     // rows per task: a multiple of every tile height
  private static final long SERIAL_WORK = 262_144; // below this many multiply-adds (1 MB of weights at one row) handing
                                                  // work to other threads costs more than it saves

  /** out (n, w.rows) = x (n, w.cols) · Wᵀ, plus W's bias when it has one. */
  public static void matmul(ThreadPool pool, float[] out, float[] x, int n, PackedMatrix w) {
    requireDense(w);
    run(pool, out, x, n, w, w.bias != null ? Tiles.BIAS : Tiles.STORE);
  }

  /** acc (n, w.rows) += x (n, w.cols) · Wᵀ: a residual stream takes the projection without a temporary. */
  public static void matmulAdd(ThreadPool pool, float[] acc, float[] x, int n, PackedMatrix w) {
    requireDense(w);
    if (w.bias != null) throw new IllegalArgumentException("matmulAdd takes a matrix without bias");
    run(pool, acc, x, n, w, Tiles.ADD);
  }

  /** out (n, hidden) = silu(x · Gateᵀ) ⊙ (x · Upᵀ), W from {@link PackedMatrix#gateUp}. */
  public static void swiglu(ThreadPool pool, float[] out, float[] x, int n, PackedMatrix w) {
    if (!w.gateUp) throw new IllegalArgumentException("swiglu needs a matrix packed by PackedMatrix.gateUp");
    run(pool, out, x, n, w, Tiles.SWIGLU);
  }

  private static void requireDense(PackedMatrix w) {
    if (w.gateUp) throw new IllegalArgumentException("a gate/up pair goes through Gemm.swiglu");
  }

  private static void run(ThreadPool pool, float[] out, float[] x, int n, PackedMatrix w, int mode) {
    if (n <= 0) return;
    if (x.length < (long) n * w.cols || out.length < (long) n * w.rows) {
      throw new IllegalArgumentException("buffers too small for " + n + " rows of (" + w.rows + ", " + w.cols + ")");
    }
    int panels = w.panelCount();
    if ((long) n * w.rows * w.cols < SERIAL_WORK || pool.threads() == 1) {
      block(out, x, 0, n, w, 0, panels, mode);
      return;
    }
    int rowBlocks = (n + ROW_BLOCK - 1) / ROW_BLOCK;
    // few row blocks (decode, short chunks): split the panels too, about four tasks per thread
    int groups = Math.min(panels, Math.max(1, (4 * pool.threads() + rowBlocks - 1) / rowBlocks));
    pool.forEach(rowBlocks * groups, t -> {
      int rb = t / groups, g = t % groups;
      int r0 = rb * ROW_BLOCK, r1 = Math.min(n, r0 + ROW_BLOCK);
      int p0 = (int) ((long) panels * g / groups), p1 = (int) ((long) panels * (g + 1) / groups);
      block(out, x, r0, r1, w, p0, p1, mode);
    });
  }

  /**
   * Rows [r0, r1) × panels [p0, p1): panel by panel, all rows against each. A block of at least a
   * full tile's rows is packed first ({@link Tiles#packRows}; the copy costs one pass over the
   * rows, the tiles then read them at the FMA units' rate); fewer rows (decode) are read in place.
   */
  private static void block(float[] out, float[] x, int r0, int r1, PackedMatrix w, int p0, int p1, int mode) {
    int nr = Tiles.NR, width = w.gateUp ? nr / 2 : nr, outDim = w.rows, cols = w.cols, rows = r1 - r0;
    float[] scratch = SCRATCH.get();  // the tiles write it before they read it
    int scratchSize = Math.max(Tiles.SCRATCH, rows * nr);
    if (scratch.length < scratchSize) SCRATCH.set(scratch = new float[scratchSize]);
    float[] packed = null;
    if (rows >= Tiles.MR) {
      packed = PACKED_ROWS.get();
      if (packed.length < rows * cols) PACKED_ROWS.set(packed = new float[rows * cols]);
    }
    if (NativeTiles.enabled) { // the same chains in C, the packing included
      NativeTiles.gemmBlock(out, x, r0, r1, outDim, cols, w.panels, p0, p1, width, mode, w.bias, packed, scratch);
      return;
    }
    if (packed != null) Tiles.packRows(rows, x, r0 * cols, cols, cols, packed);
    for (int p = p0; p < p1; p++) {
      int col = p * width, cw = Math.min(width, outDim - col);
      if (packed != null) {
        Tiles.packedTile(rows, packed, 0, w.panels, p * cols * nr, cols, out, r0 * outDim + col, outDim, cw, mode, w.bias,
            p * nr, scratch);
      } else {
        Tiles.tile(rows, x, r0 * cols, cols, w.panels, p * cols * nr, cols, out, r0 * outDim + col, outDim, cw, mode,
            w.bias, p * nr, scratch);
      }
    }
  }

  // each thread's packed rows (ROW_BLOCK, cols) of the block it runs, grown to the widest matrix it met
  private static final ThreadLocal<float[]> PACKED_ROWS = ThreadLocal.withInitial(() -> new float[0]);
  // each thread's tile scratch (rows × NR floats), grown likewise
  private static final ThreadLocal<float[]> SCRATCH = ThreadLocal.withInitial(() -> new float[0]);
}
