package io.longsieve.cpu.kernels;

import java.util.Arrays;

/**
 * Attention on the CPU the way FlashAttention computes it, the one core that dense, list and
 * gathered attention all run on. A problem has groups (a KV head, or a query head with a list of
 * its own), each with query positions i and heads hh that share the group's key/value list, and
 * per position the list entries it sees, [from, to). A task takes a tile of positions of one group
 * with all their heads (the query heads of a KV head read each key/value tile once) and walks the
 * list in tiles of {@link #KEY_TILE} entries: scores of a block of rows against the tile
 * (register-tiled, {@link Tiles}), an online softmax (running max and sum per row, the output
 * rescaled when the max grows), then probabilities times values into the running output
 * ({@link TileWorkspace}). Tasks go to the threads one at a time, the heaviest (latest positions)
 * first. Before the tasks, the key and value tiles the problem reads are packed once (keys
 * transposed into panels), in parallel, so no task copies keys.
 *
 * <p>Key tiles start at multiples of KEY_TILE whichever task reads them, so a row's result depends
 * only on its own query and entries, never on the rows it was computed with or on the thread count.
 *
 * <p>A problem with one position (decode) scores straight from the keys (no packing: each key is
 * read once) and is split, over a long list, into segments of {@link #SEGMENT} entries
 * (boundaries at multiples of it, so the split depends on the list alone), one task each; the
 * partial outputs merge by their maxima at the end.
 *
 * <p>Arithmetic against the plain definition (softmax, then Σ p·v, as in ListAttention): the query
 * is multiplied by the scale and log2 e before the dot products, exponentials are fp32 polynomials
 * of base 2 ({@link ScalarTiles#exp2}), sums run per tile, and the output is divided by the sum at the end:
 * the results agree to float rounding, not bit for bit.
 */
public final class TiledAttention {
  private TiledAttention() {}

  static final int KEY_TILE = 64;    // list entries per key/value tile: a multiple of every panel width
  static final int TASK_ROWS = 64;   // query rows (positions × heads) a prefill task aims at, at least
  static final int TASK_ROWS_MAX = 256; // ... and at most: a task streams its group's packed keys and values
                                        // once, so taller tasks read the cache fewer times per chunk
  static final int SEGMENT = 2048;   // list entries per task of a one-position problem

  /** What a caller supplies; called from the pool's threads, so it must only read shared state. */
  public interface Problem {
    /** Query positions of group g (each with the group's heads). */
    int positions(int g);

    /** The key/value list of group g. */
    KvList keys(int g);

    /** Head hh of group g at position i: its query, rotated as the keys of the list want it, into dst[off .. off+d). */
    void query(int g, int i, int hh, float[] dst, int off);

    /** First list entry position i of group g sees. */
    int from(int g, int i);

    /** One past the last list entry position i of group g sees (at least from + 1). */
    int to(int g, int i);

    /** Where head hh of group g at position i writes its d outputs. */
    int outOffset(int g, int i, int hh);
  }

  /**
   * Runs the problem: per group g, positions(g) × heads query rows of head dimension d, softmax
   * scale {@code scale}, outputs into out.
   */
  public static void run(ThreadPool pool, PackedTiles packed, int groups, int heads, int d, float scale, Problem p,
                         float[] out) {
    run(pool, packed, groups, heads, d, scale, p, out, null, 0);
  }

  /**
   * As {@link #run(ThreadPool, PackedTiles, int, int, int, float, Problem, float[])}; then, when
   * {@code attended} is not null (evaluation runs only), tells it which cache slots each query row
   * and head of {@code layer} saw.
   */
  public static void run(ThreadPool pool, PackedTiles packed, int groups, int heads, int d, float scale, Problem p,
                         float[] out, AttendedKeys attended, int layer) {
    compute(pool, packed, groups, heads, d, scale, p, out);
    if (attended != null) report(attended, layer, groups, heads, d, p);
  }

  /** Each (position, head) row's entries [from, to) as cache slots, row-head = its output offset / d. */
  private static void report(AttendedKeys attended, int layer, int groups, int heads, int d, Problem p) {
    for (int g = 0; g < groups; g++) {
      KvList list = p.keys(g);
      for (int i = 0; i < p.positions(g); i++) {
        int from = p.from(g, i), to = p.to(g, i);
        for (int hh = 0; hh < heads; hh++) {
          int rowHead = p.outOffset(g, i, hh) / d;
          if (list.valueIdx() == null) attended.attendedRange(layer, rowHead, from, to);
          else attended.attended(layer, rowHead, list.valueIdx(), list.valueIdxOff() + from, to - from);
        }
      }
    }
  }

  private static void compute(ThreadPool pool, PackedTiles packed, int groups, int heads, int d, float scale, Problem p,
                              float[] out) {
    int most = 0;
    long allRows = 0;
    for (int g = 0; g < groups; g++) {
      most = Math.max(most, p.positions(g));
      allRows += (long) p.positions(g) * heads;
    }
    if (most <= 1) {
      if (most == 1) runOnePosition(pool, groups, heads, d, scale, p, out);
      return;
    }
    packed.plan(groups, heads, d, p);
    pool.forEach(packed.tiles, t -> packed.pack(t, p));
    // rows per task: as many as leave about four tasks per thread (the causal tail evens out), between
    // TASK_ROWS and TASK_ROWS_MAX; positions per task: a whole number of 8-row blocks (3 heads: 24 positions
    // for 64 rows). The split never changes a row's result: key tiles start at multiples of KEY_TILE.
    int target = (int) Math.max(TASK_ROWS, Math.min(TASK_ROWS_MAX, allRows / (4L * pool.threads())));
    int unit = 8 / gcd(heads, 8), per = ((target + heads - 1) / heads + unit - 1) / unit * unit;
    int maxTiles = (most + per - 1) / per;
    int[] task = new int[groups * maxTiles]; // (group, tile) as tile · groups + g: the last positions see the most
    int tasks = 0;                           // entries, so the latest tiles go first
    for (int tile = maxTiles - 1; tile >= 0; tile--) {
      for (int g = 0; g < groups; g++) if (tile * per < p.positions(g)) task[tasks++] = tile * groups + g;
    }
    pool.forEach(tasks, t -> {
      int g = task[t] % groups, i0 = task[t] / groups * per, i1 = Math.min(p.positions(g), i0 + per);
      TileWorkspace ws = TileWorkspace.get(i1 - i0, heads, d);
      ws.queries(p, g, i0, i1, scale);
      ws.attendPacked(packed, g);
      ws.write(p, g, i0, out);
    });
  }

  private static int gcd(int a, int b) {
    return b == 0 ? a : gcd(b, a % b);
  }

  private static void runOnePosition(ThreadPool pool, int groups, int heads, int d, float scale, Problem p,
                                     float[] out) {
    int[] first = new int[groups + 1];   // tasks of group g: first[g] .. first[g + 1] - 1 (none without a position)
    for (int g = 0; g < groups; g++) {
      int from = p.positions(g) == 0 ? 0 : p.from(g, 0), to = p.positions(g) == 0 ? 0 : p.to(g, 0);
      first[g + 1] = first[g] + (to == 0 ? 0 : to - from <= SEGMENT ? 1 : (to - 1) / SEGMENT - from / SEGMENT + 1);
    }
    int tasks = first[groups];
    int dPad = TileWorkspace.padded(d);
    boolean anySplit = false;
    for (int g = 0; g < groups; g++) anySplit |= first[g + 1] - first[g] > 1;
    float[] partO = anySplit ? new float[tasks * heads * dPad] : null; // (task, head, dPad) unnormalised outputs
    float[] partM = anySplit ? new float[tasks * heads] : null;        // (task, head) running max
    float[] partL = anySplit ? new float[tasks * heads] : null;        // (task, head) running sum
    pool.forEach(tasks, t -> {
      int g = 0;
      while (first[g + 1] <= t) g++;
      boolean split = first[g + 1] - first[g] > 1;
      int lo = 0, hi = Integer.MAX_VALUE;
      if (split) {
        lo = (p.from(g, 0) / SEGMENT + t - first[g]) * SEGMENT;
        hi = lo + SEGMENT;
      }
      TileWorkspace ws = TileWorkspace.get(1, heads, d);
      ws.queries(p, g, 0, 1, scale);
      ws.attendDirect(p.keys(g), lo, hi);
      if (split) ws.keepPartial(partO, partM, partL, t);
      else ws.write(p, g, 0, out);
    });
    if (!anySplit) return;
    float[] acc = new float[dPad];
    for (int g = 0; g < groups; g++) {
      if (first[g + 1] - first[g] <= 1) continue;
      for (int hh = 0; hh < heads; hh++) {
        float max = Float.NEGATIVE_INFINITY;
        for (int t = first[g]; t < first[g + 1]; t++) max = Math.max(max, partM[t * heads + hh]);
        Arrays.fill(acc, 0f);
        float sum = 0;
        for (int t = first[g]; t < first[g + 1]; t++) {
          float w = ScalarTiles.exp2(partM[t * heads + hh] - max); // 0 for a segment the head saw nothing of
          sum += partL[t * heads + hh] * w;
          int o = (t * heads + hh) * dPad;
          for (int e = 0; e < d; e++) acc[e] += partO[o + e] * w;
        }
        Tiles.scale(acc, 0, 1f / sum, out, p.outOffset(g, 0, hh), d);
      }
    }
  }

  /**
   * The key/value tiles of one call, packed once for all its tasks: per group, the tiles covering
   * the entries any of its positions sees (for a prefill chunk, the whole cache so far: about as
   * many bytes as the layer's keys and values). One per model, reused from call to call: calls
   * must not overlap (the CPU model runs one forward at a time).
   */
  public static final class PackedTiles {

    int tiles, d, dPad, groups, heads;
    boolean bias;
    int[] lo = new int[0];        // (groups) first entry any position of the group sees
    int[] hi = new int[0];        // (groups) one past the last
    int[] firstTile = new int[0]; // (groups) lo / KEY_TILE
    int[] base = new int[0];      // (groups + 1) the group's first tile in the buffers
    float[] k = new float[0];     // (tiles, KEY_TILE / NR, d, NR) keys, transposed into panels
    float[] v = new float[0];     // (tiles, dPad / NR, KEY_TILE, NR) values in panels
    float[] b = new float[0];     // (tiles, heads, KEY_TILE) logit biases times log2 e, when the list has them

    void plan(int groups, int heads, int d, Problem p) {
      if (lo.length < groups) {
        lo = new int[groups];
        hi = new int[groups];
        firstTile = new int[groups];
        base = new int[groups + 1];
      }
      this.groups = groups;
      this.heads = heads;
      this.d = d;
      this.dPad = TileWorkspace.padded(d);
      for (int g = 0; g < groups; g++) {
        int a = Integer.MAX_VALUE, z = 0;
        for (int i = 0; i < p.positions(g); i++) {
          a = Math.min(a, p.from(g, i));
          z = Math.max(z, p.to(g, i));
        }
        lo[g] = a == Integer.MAX_VALUE ? 0 : a;
        hi[g] = Math.max(lo[g], z);
        firstTile[g] = a / KEY_TILE;
        base[g + 1] = base[g] + (hi[g] + KEY_TILE - 1) / KEY_TILE - firstTile[g];
      }
      tiles = base[groups];
      bias = p.keys(0).bias() != null;
      if (k.length < tiles * KEY_TILE * d) k = new float[tiles * KEY_TILE * d];
      if (v.length < tiles * KEY_TILE * dPad) v = new float[tiles * KEY_TILE * dPad];
      if (bias && b.length < tiles * heads * KEY_TILE) b = new float[tiles * heads * KEY_TILE];
    }

    /** Buffer tile of group g's list entry j0 (a multiple of KEY_TILE). */
    int tileOf(int g, int j0) {
      return base[g] + j0 / KEY_TILE - firstTile[g];
    }

    void pack(int t, Problem p) {
      int g = 0;
      while (base[g + 1] <= t) g++;
      int nr = Tiles.NR, j0 = (firstTile[g] + t - base[g]) * KEY_TILE;
      KvList list = p.keys(g);
      float[] keys = list.keys(), values = list.values(), bs = list.bias();
      for (int j = Math.max(j0, lo[g]); j < Math.min(j0 + KEY_TILE, hi[g]); j++) {
        int col = j - j0, ko = list.keyOffset(j), vo = list.valueOffset(j);
        int kb = t * KEY_TILE * d + (col / nr) * d * nr + col % nr;
        for (int e = 0; e < d; e++) k[kb + e * nr] = keys[ko + e];
        int vb = t * KEY_TILE * dPad;
        for (int c = 0; c * nr < d; c++) {
          System.arraycopy(values, vo + c * nr, v, vb + (c * KEY_TILE + col) * nr, Math.min(nr, d - c * nr));
        }
        if (bias) {
          for (int hh = 0; hh < heads; hh++) b[(t * heads + hh) * KEY_TILE + col] = bs[list.biasOffset(j, hh)] * ScalarTiles.LOG2E;
        }
      }
    }
  }
}
