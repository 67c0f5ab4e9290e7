package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.RopeTable;
import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.cpu.kernels.TiledAttention;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;

/**
 * What attention code needs from the model: shapes, RoPE (and its table of angles), the worker
 * threads and the buffers of the tiled attention core (one model runs one forward at a time).
 */
public record AttentionContext(ModelConfig config, Rope rope, ThreadPool pool, RopeTable ropeTable,
                               TiledAttention.PackedTiles tiles) {

  public AttentionContext(ModelConfig config, Rope rope, ThreadPool pool) {
    this(config, rope, pool, new RopeTable(rope), new TiledAttention.PackedTiles());
  }

  public float scale() {
    return (float) (1.0 / Math.sqrt(config.headDim()));
  }

  /**
   * Sliding window of the layer: a query at position p sees keys at positions &gt; p − window; 0 for
   * none. The one place a model family with per-layer windows (Gemma 3's local layers) plugs in.
   */
  public int window(int layer) {
    return config.slidingWindow();
  }
}
