package io.longsieve.cuda.kernels;

import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.model.QuantizationConfig.Activations;

/**
 * A linear layer's FP8 weight on the device, as the FP8 GEMM and GEMV read it (hopper/gemm_fp8_sm90.cu,
 * fp8/fp8.cu). Fused matrices (q|k|v, gate|up) hold their parts' rows one after the other, with the
 * parts' scales laid out the same way.
 *
 * @param values      (n, k) float8_e4m3, K contiguous
 * @param scales      block: (n / 128, ceil(k / 128)) f32, one per 128 x 128 block; else (n) f32, one per row
 *                    (a per-tensor scale repeated over its tensor's rows)
 * @param block       128 x 128 weight blocks
 * @param activations how a GEMM quantizes its input (the checkpoint's scheme; weight-only checkpoints are
 *                    quantized as finely as the kernel allows: per row, or per row and 128 columns)
 * @param inputScale  (1) f32, the static input scale (the largest of the fused parts'), STATIC_TENSOR only
 */
public record Fp8Matrix(DeviceBuffer values, DeviceBuffer scales, boolean block, Activations activations,
                        DeviceBuffer inputScale) {}
