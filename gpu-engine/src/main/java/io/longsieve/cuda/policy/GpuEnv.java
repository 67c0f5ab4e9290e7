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
 * @param invFreq (headDim / 2) f32 RoPE inverse frequencies, as model/Rope computes them
 */
public record GpuEnv(ModelConfig config, CudaContext ctx, Kernels k, Kernels.Workspace ws, CUdeviceptr invFreq,
                     Path modelDir) {

  public float scale() {
    return (float) (1.0 / Math.sqrt(config.headDim()));
  }
}
