package io.longsieve.cuda.kernels;

/**
 * Which decode GEMV an engine runs ({@link Kernels#gemv}), chosen once so that every call of the engine
 * runs the same one: a row's result then never depends on the batch it came in (the batching engine's
 * "a request gets the tokens it gets alone"). Measured on the H200 (bench "gemv kernel" rows): for one
 * row the CUDA-core kernel streams the weights 1-2% faster; from 2 rows on the tensor-core one is
 * ahead, and at 8 rows it keeps about the one-row speed where the CUDA-core kernel loses half of it to
 * re-reading the activations.
 */
public enum Gemv {
  /** gemv_bf16 (gemm/gemm.cu): for engines that decode one sequence a step. */
  CUDA_CORES,
  /** gemv_mma (gemm/gemm.cu): for engines that batch sequences in a step. */
  TENSOR_CORES;

  /** For an engine running up to maxBatch sequences a step; -Dlongsieve.gemv=simt|mma overrides it. */
  public static Gemv forBatch(int maxBatch) {
    String forced = System.getProperty("longsieve.gemv");
    if ("simt".equals(forced)) return CUDA_CORES;
    if ("mma".equals(forced)) return TENSOR_CORES;
    if (forced != null) throw new IllegalArgumentException("longsieve.gemv is simt or mma, not " + forced);
    return maxBatch > 1 ? TENSOR_CORES : CUDA_CORES;
  }
}
