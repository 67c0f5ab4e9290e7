package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;

/** What attention code needs from the model: shapes, RoPE and the worker threads. */
public record AttentionContext(ModelConfig config, Rope rope, ThreadPool pool) {

  public float scale() {
    return (float) (1.0 / Math.sqrt(config.headDim()));
  }
}
