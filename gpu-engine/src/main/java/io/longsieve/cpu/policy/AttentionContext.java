package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.RopeTable;
import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.cpu.kernels.TiledAttention;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;

/**
 * What attention code needs from the model for one layer and call: shapes, the RoPE it rotates with
 * (the layer's own, at the call's length: {@link Rope#atLength}) and that RoPE's table of angles, its
 * sliding window, the worker threads and the buffers of the tiled attention core (shared by every
 * context of one model: a model runs one forward at a time).
 *
 * @param window 0: the layer attends every cached slot; else query position p sees the slots of
 *     positions (p - window, p] (a sliding-window layer: Gemma 3's local layers, Mistral's)
 */
public record AttentionContext(ModelConfig config, Rope rope, ThreadPool pool, int window, RopeTable ropeTable,
                               TiledAttention.PackedTiles tiles) {

  /** A layer's context: its own table of rope's angles, the model's tile buffers. */
  public AttentionContext(ModelConfig config, Rope rope, ThreadPool pool, int window, TiledAttention.PackedTiles tiles) {
    this(config, rope, pool, window, new RopeTable(rope), tiles);
  }

  /** A context for a model whose layers all attend alike: the window every layer has, if any. */
  public AttentionContext(ModelConfig config, Rope rope, ThreadPool pool) {
    this(config, rope, pool, config.slidingLayers() == config.numLayers() ? config.slidingWindow() : 0,
        new TiledAttention.PackedTiles());
  }

  /** Attention logits are q·k times this (1/√headDim, or the family's query scale). */
  public float scale() {
    return (float) config.traits().queryScale();
  }
}
