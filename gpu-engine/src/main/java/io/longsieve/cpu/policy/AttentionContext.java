package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;

/**
 * What attention code needs from the model for one layer and call: shapes, the RoPE table it rotates
 * with (the layer's own, at the call's length: {@link Rope#atLength}), its sliding window and the
 * worker threads.
 *
 * @param window 0: the layer attends every cached slot; else query position p sees the slots of
 *     positions (p - window, p] (a sliding-window layer: Gemma 3's local layers, Mistral's)
 */
public record AttentionContext(ModelConfig config, Rope rope, ThreadPool pool, int window) {

  /** A context for a model whose layers all attend alike: the window every layer has, if any. */
  public AttentionContext(ModelConfig config, Rope rope, ThreadPool pool) {
    this(config, rope, pool, config.slidingLayers() == config.numLayers() ? config.slidingWindow() : 0);
  }

  /** Attention logits are q·k times this (1/√headDim, or the family's query scale). */
  public float scale() {
    return (float) config.traits().queryScale();
  }
}
