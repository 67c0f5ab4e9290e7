package io.longsieve.cuda.policy;

import io.longsieve.cuda.kernels.Kernels;
import jcuda.driver.CUdeviceptr;

/**
 * One layer's attention call on the GPU: n query rows at positions pos0 .. pos0 + n - 1 whose keys
 * and values were just appended at slots before .. before + n - 1 (slot and position differ once
 * a KV policy compacted the cache). Everything is queued on the engine's stream.
 *
 * @param qPre    (n, qStride) f32 rows; queries before RoPE in columns [0, nHeads * headDim)
 * @param q       (n, nHeads, headDim) bf16 queries rotated at their positions (what dense attention takes)
 * @param kv      this layer of the paged cache, slots [0, before + n) in use
 * @param out     (n, nHeads, headDim) bf16 attention output; every element must be written
 */
public record LayerCall(int layer, int n, int pos0, int before, CUdeviceptr qPre, int qStride, CUdeviceptr q,
                        Kernels.KvView kv, CUdeviceptr out) {}
