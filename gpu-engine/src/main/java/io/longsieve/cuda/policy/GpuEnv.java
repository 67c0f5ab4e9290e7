package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.model.ModelConfig;
import java.nio.file.Path;
import jcuda.driver.CUdeviceptr;

/**
 * What a GPU attention policy needs from the engine: the model's shapes, the dense kernels (whose
 * launcher the other kernel families share), RoPE inverse frequencies on the device, the shared
 * attention scratch and the model folder (TSA's layer profile).
 *
 * @param invFreq (headDim / 2) f32 RoPE inverse frequencies of the full-attention layers, as model/Rope's
 *     deviceInverseFrequencies (for a length-dependent scaling, the table of the call in flight): the
 *     only layers policies see, since sliding-window layers always attend densely ({@link GpuPolicy})
 */
public record GpuEnv(ModelConfig config, CudaContext ctx, Kernels k, Kernels.Workspace ws, CUdeviceptr invFreq,
                     Path modelDir) {

  /** Attention logits are q·k times this: 1/√headDim, or the family's query scale (Gemma 3). */
  public float scale() {
    return (float) config.traits().queryScale();
  }
}
