package io.longsieve.policy;

import java.util.function.Consumer;

/**
 * Test hook: while a recorder is installed, both Token Sparse Attention implementations
 * (cpu/policy/TokenSparseAttention, cuda/policy/GpuTsa) report every sparse selection they make,
 * so tests can hold the CPU's and the GPU's selections, or two runs', side by side. Off in
 * production: one volatile read per sparse layer and chunk. One recording test at a time.
 */
public final class TsaSelections {
  private TsaSelections() {}

  /**
   * One sparse selection: the layer, the position of the chunk's first query, and per query head
   * the selected tokens as original positions, ascending (the window last).
   */
  public record Selection(int layer, int chunkPos0, int[][] positions) {}

  private static volatile Consumer<Selection> recorder;

  /** Installs {@code r} (null removes it). */
  public static void record(Consumer<Selection> r) {
    recorder = r;
  }

  /** Whether a recorder is installed (the implementations skip building the record otherwise). */
  public static boolean active() {
    return recorder != null;
  }

  /**
   * Reports lists (heads, len) of slots, slot + posOffset being a slot's position; a no-op without
   * a recorder.
   */
  public static void report(int layer, int chunkPos0, int[] lists, int heads, int len, int posOffset) {
    Consumer<Selection> r = recorder;
    if (r == null) return;
    int[][] pos = new int[heads][len];
    for (int h = 0; h < heads; h++) for (int e = 0; e < len; e++) pos[h][e] = lists[h * len + e] + posOffset;
    r.accept(new Selection(layer, chunkPos0, pos));
  }
}
