package io.longsieve.cpu.kernels;

/**
 * The model's matrix products on the CPU: x (n, cols) times a {@link PackedMatrix}ᵀ, register-tiled
 * ({@link Tiles}). A prefill product (more than one block of 64 rows) whose weights do not fit in
 * a core's L2 packs its rows once, then each task takes a group of weight panels that fits a share
 * of L2 ({@link #L2_SHARE}) and runs a range of row blocks over it, so the weights stream from L3 or
 * memory once per row range instead of once per 64-row block ({@link Plan}). Otherwise a task
 * takes a block of rows (packed by the task, or read in place when fewer than a tile: decode) and a
 * group of panels. Within a task the loop runs panel by panel over its rows, so each weight is read
 * once per task whatever the number of rows (a batched decode step reads the weights once for all
 * its sequences). Every output is the same fma chain over the input features for any n and any
 * split, so a row's result never depends on the rows computed with it.
 */
public final class Gemm {
  private Gemm() {}

  private static final int ROW_BLOCK = 64;     // rows packed and run together: a multiple of every tile height
  private static final long SERIAL_WORK = 262_144; // below this many multiply-adds (1 MB of weights at one row) handing
                                                  // work to other threads costs more than it saves
  // Weight bytes a prefill task keeps in L2 (2 MiB a core here) while its row blocks pass over them, beside
  // a row block's packed inputs (64 × cols floats). A/B in one JVM, 2 threads, a 100M layer's four products at
  // 512 rows: 256 KiB and 512 KiB ran 1.15-1.27x the 64-row tasks (medians of paired rounds), 1 MiB 1.05-1.12x,
  // 1.5 MiB 0.92x; at 2048 rows 0.96-1.05x. The bits do not depend on it.
  static final long L2_SHARE = 512 * 1024;
  // Weights up to this size stay in a core's L2 while 64-row tasks pass over them, and the grouped path's
  // separate packing pass only costs: the bundled model (all its matrices ≤ 1.5 MiB) prefilled 2K tokens
  // about 7% slower grouped (3 of 4 alternated JVMs), the 100M model (2.4-12.6 MiB) 1.1-1.3x faster (3 of 3).
  private static final long L2_BYTES = 2L << 20;

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
    if (n > ROW_BLOCK && (long) panels * w.cols * Tiles.NR * Float.BYTES > L2_BYTES) {
      l2Blocked(pool, out, x, n, w, mode, L2_SHARE);
      return;
    }
    // weights that fit in L2 (or one row block: decode, short chunks): each task packs its own
    // block of rows and runs it over a group of panels, about four tasks per thread
    int rowBlocks = (n + ROW_BLOCK - 1) / ROW_BLOCK;
    int groups = Math.min(panels, Math.max(1, (4 * pool.threads() + rowBlocks - 1) / rowBlocks));
    pool.forEach(rowBlocks * groups, t -> {
      int rb = t / groups, g = t % groups;
      int r0 = rb * ROW_BLOCK, r1 = Math.min(n, r0 + ROW_BLOCK);
      int p0 = (int) ((long) panels * g / groups), p1 = (int) ((long) panels * (g + 1) / groups);
      block(out, x, r0, r1, w, p0, p1, mode);
    });
  }

  /**
   * How a prefill product is cut into tasks: groups of {@code perGroup} panels (at most {@code share}
   * bytes of weights, at least one panel) times ranges of {@code blocksPerRange} row blocks, with as
   * few ranges as leave about four tasks per thread. Each panel is then read from memory once per
   * row range and each packed row once per panel group.
   */
  record Plan(int rowBlocks, int perGroup, int groups, int blocksPerRange, int ranges) {
    static Plan of(int n, int panels, int cols, int threads, long share) {
      int rowBlocks = (n + ROW_BLOCK - 1) / ROW_BLOCK;
      int perGroup = (int) Math.max(1, Math.min(panels, share / ((long) cols * Tiles.NR * Float.BYTES)));
      int groups = (panels + perGroup - 1) / perGroup;
      int ranges = Math.min(rowBlocks, Math.max(1, (4 * threads + groups - 1) / groups));
      int blocksPerRange = (rowBlocks + ranges - 1) / ranges;
      return new Plan(rowBlocks, perGroup, groups, blocksPerRange, (rowBlocks + blocksPerRange - 1) / blocksPerRange);
    }

    int tasks() {
      return groups * ranges;
    }
  }

  /** The prefill path (see the class comment), weights kept {@code share} bytes a task. */
  static void l2Blocked(ThreadPool pool, float[] out, float[] x, int n, PackedMatrix w, int mode, long share) {
    int cols = w.cols, panels = w.panelCount();
    Plan plan = Plan.of(n, panels, cols, pool.threads(), share);
    float[] packed = PACKED_ALL.get(); // (n, cols): row block b from b · ROW_BLOCK · cols, as Tiles.packRows lays it out
    if (packed.length < n * cols) PACKED_ALL.set(packed = new float[n * cols]);
    float[] a = packed;
    pool.forEach(plan.rowBlocks(), b -> {
      int r0 = b * ROW_BLOCK, r1 = Math.min(n, r0 + ROW_BLOCK);
      Tiles.packRows(r1 - r0, x, r0 * cols, cols, cols, a, r0 * cols);
    });
    pool.forEach(plan.tasks(), t -> {
      int g = t / plan.ranges(), range = t % plan.ranges();
      int p0 = g * plan.perGroup(), p1 = Math.min(panels, p0 + plan.perGroup());
      int b0 = range * plan.blocksPerRange(), b1 = Math.min(plan.rowBlocks(), b0 + plan.blocksPerRange());
      for (int b = b0; b < b1; b++) {
        int r0 = b * ROW_BLOCK;
        panels(out, a, r0 * cols, r0, Math.min(n, r0 + ROW_BLOCK), w, p0, p1, mode);
      }
    });
  }

  /**
   * Rows [r0, r1) × panels [p0, p1): panel by panel, all rows against each. A block of at least a
   * full tile's rows is packed first ({@link Tiles#packRows}; the copy costs one pass over the
   * rows, the tiles then read them at the FMA units' rate); fewer rows (decode) are read in place.
   */
  private static void block(float[] out, float[] x, int r0, int r1, PackedMatrix w, int p0, int p1, int mode) {
    int nr = Tiles.NR, width = w.gateUp ? nr / 2 : nr, outDim = w.rows, cols = w.cols, rows = r1 - r0;
    if (rows >= Tiles.MR) {
      float[] packed = PACKED_ROWS.get();
      if (packed.length < rows * cols) PACKED_ROWS.set(packed = new float[rows * cols]);
      Tiles.packRows(rows, x, r0 * cols, cols, cols, packed);
      panels(out, packed, 0, r0, r1, w, p0, p1, mode);
      return;
    }
    float[] scratch = scratch(rows);
    for (int p = p0; p < p1; p++) {
      int col = p * width, cw = Math.min(width, outDim - col);
      Tiles.tile(rows, x, r0 * cols, cols, w.panels, p * cols * nr, cols, out, r0 * outDim + col, outDim, cw, mode,
          w.bias, p * nr, scratch);
    }
  }

  /** Rows [r0, r1), packed from ap[apo] ({@link Tiles#packRows}), × panels [p0, p1), panel by panel. */
  private static void panels(float[] out, float[] ap, int apo, int r0, int r1, PackedMatrix w, int p0, int p1, int mode) {
    int nr = Tiles.NR, width = w.gateUp ? nr / 2 : nr, outDim = w.rows, cols = w.cols, rows = r1 - r0;
    float[] scratch = scratch(rows);
    for (int p = p0; p < p1; p++) {
      int col = p * width, cw = Math.min(width, outDim - col);
      Tiles.packedTile(rows, ap, apo, w.panels, p * cols * nr, cols, out, r0 * outDim + col, outDim, cw, mode, w.bias,
          p * nr, scratch);
    }
  }

  /** This thread's tile scratch for a block of {@code rows} rows (the tiles write it before they read it). */
  private static float[] scratch(int rows) {
    float[] scratch = SCRATCH.get();
    int size = Math.max(Tiles.SCRATCH, rows * Tiles.NR);
    if (scratch.length < size) SCRATCH.set(scratch = new float[size]);
    return scratch;
  }

  // each thread's packed rows (ROW_BLOCK, cols) of the block it runs, grown to the widest matrix it met
  private static final ThreadLocal<float[]> PACKED_ROWS = ThreadLocal.withInitial(() -> new float[0]);
  // the calling thread's packed rows of a whole prefill product (n, cols), read by every task of the call;
  // grown to the largest it met (at most a chunk's rows times the widest input: less than the model's activations)
  private static final ThreadLocal<float[]> PACKED_ALL = ThreadLocal.withInitial(() -> new float[0]);
  // each thread's tile scratch (rows × NR floats), grown likewise
  private static final ThreadLocal<float[]> SCRATCH = ThreadLocal.withInitial(() -> new float[0]);
}
