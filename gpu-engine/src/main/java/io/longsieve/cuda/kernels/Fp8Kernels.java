package io.longsieve.cuda.kernels;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.driver.Launcher;
import io.longsieve.cuda.driver.TensorMaps;
import io.longsieve.model.QuantizationConfig.Activations;
import jcuda.driver.CUdeviceptr;

/**
 * The products of FP8 weights ({@link Fp8Matrix}) with bf16 activations, and the activation scratch
 * they need (sized once, before any CUDA graph is captured; freed on close).
 *
 * <ul>
 *   <li>up to 8 rows (decode): gemv_fp8 (fp8/fp8.cu) streams the FP8 weights once, each weight times
 *       its scale, the bf16 activations as they are;
 *   <li>more rows (prefill), on sm_90a: the input is quantized to e4m3 as the checkpoint says
 *       (quant_fp8_rows / quant_fp8_groups, with a static or a dynamic per-tensor scale where it
 *       says so), then gemm_fp8_sm90 (one scale per row of each operand) or gemm_fp8_block_sm90 (128 x
 *       128 weight blocks) multiplies with f32 accumulation and applies the scales.
 * </ul>
 * FP8 weights only reach the device where those kernels run: {@link #supported} is the rule
 * CudaWeights follows, and elsewhere it dequantizes to bf16 on load (the explicit fallback).
 * Launch constants mirror the kernels' #defines.
 */
public final class Fp8Kernels implements AutoCloseable {

  static final int GEMM_SMEM = 4 * (128 + 256) * 128 + 1024 + 2 * 4 * 8;        // GF_SMEM
  static final int GEMM_BLOCK_SMEM = 6 * (128 + 128) * 128 + 1024 + 2 * 6 * 8;  // GFB_SMEM
  /** Columns per activation scale group and rows and columns per weight scale block. */
  public static final int GROUP = 128;

  private final Kernels k;
  private final Launcher l;
  private final DeviceBuffer q;       // (maxRows, maxK) e4m3 quantized activations
  private final DeviceBuffer scales;  // (maxRows, ceil(maxK / 128)) f32 activation scales
  private final DeviceBuffer amax;    // (1) f32 dynamic per-tensor scale
  private final long maxRows, maxK;

  /** Scratch for GEMMs of up to maxRows rows and maxK input columns. */
  public Fp8Kernels(Kernels k, CudaContext ctx, long maxRows, long maxK) {
    if (!k.hopper()) {
      throw new IllegalStateException("FP8 weights stay FP8 on the device only with the sm_90a kernels ("
          + Hopper.requirement() + "); elsewhere they are dequantized to bf16 on load");
    }
    this.k = k;
    this.l = k.launcher();
    this.maxRows = maxRows;
    this.maxK = maxK;
    DeviceBuffer a = null, b = null, c = null;
    try {
      a = ctx.alloc(maxRows * maxK, "fp8 activations");
      b = ctx.alloc(maxRows * ((maxK + GROUP - 1) / GROUP) * 4, "fp8 activation scales");
      c = ctx.alloc(16, "fp8 tensor scale");
    } catch (RuntimeException e) {
      if (a != null) a.close();
      if (b != null) b.close();
      throw e;
    }
    this.q = a;
    this.scales = b;
    this.amax = c;
  }

  /** Whether FP8 weights can stay FP8 on this engine's device: the sm_90a kernels run. */
  public static boolean supported(Kernels k) {
    return k.hopper();
  }

  /**
   * Whether a weight of this layout runs the FP8 kernels: K a multiple of 16 (16-byte rows), block
   * weights in 128 x 128 blocks over whole 128-row parts, and activations the kernel can apply (per-row
   * weights cannot take per-group activation scales).
   */
  public static boolean fits(boolean block, int blockRows, int blockCols, Activations act, long k, long[] partRows) {
    if (k % 16 != 0) return false;
    if (!block) return act != Activations.DYNAMIC_GROUP;
    if (blockRows != GROUP || blockCols != GROUP) return false;
    for (long r : partRows) if (r % GROUP != 0) return false;
    return true;
  }

  /**
   * out (m, n) (mode: f32, f32 +=, bf16) = a (m, k) bf16 . w (n, k)^T with w's scales (+ bias (n) f32
   * or null): the GEMV up to 8 rows, above that the input quantized and the FP8 GEMM.
   */
  public void matmul(CUdeviceptr out, int mode, CUdeviceptr a, Fp8Matrix w, CUdeviceptr bias, int m, int n, int kDim) {
    if (m <= Kernels.GEMV_MAX_ROWS) {
      gemv(out, mode, a, w, bias, m, n, kDim);
      return;
    }
    quantize(q.ptr(), scales.ptr(), a, m, kDim, w);
    gemm(out, mode, q.ptr(), scales.ptr(), w, bias, m, n, kDim);
  }

  /** Whether {@link #gateUpSwiglu} fuses the SwiGLU into the GEMM for m rows (per-row scales only). */
  public boolean fusesSwiglu(int m, int hidden, Fp8Matrix w) {
    return !w.block() && m > Kernels.GEMV_MAX_ROWS && hidden % 128 == 0;
  }

  /**
   * out (m, hidden) bf16 = silu(gate) * up of a (m, k) bf16 . wgu (2 hidden, k)^T, wgu's rows [gate |
   * up] (Kernels.gateUpSwiglu's contract): one fused FP8 GEMM where {@link #fusesSwiglu}, else the
   * product to gu (m, 2 hidden) bf16 and swiglu_rows.
   */
  public void gateUpSwiglu(CUdeviceptr out, CUdeviceptr gu, CUdeviceptr a, Fp8Matrix wgu, int m, int hidden, int kDim) {
    if (fusesSwiglu(m, hidden, wgu)) {
      quantize(q.ptr(), scales.ptr(), a, m, kDim, wgu);
      gemm(out, Kernels.OUT_SWIGLU, q.ptr(), scales.ptr(), wgu, null, m, 2 * hidden, kDim);
    } else {
      matmul(gu, Kernels.OUT_BF16, a, wgu, null, m, 2 * hidden, kDim);
      k.swiglu(out, gu, m, hidden);
    }
  }

  /**
   * qa (m, k) e4m3 and aScales = a (m, k) bf16 quantized as w's GEMM reads it: (m) scales for per-row
   * weights, (m, ceil(k / 128)) for block weights; per row, per row and group, or one fixed scale (the
   * static input scale, or max|a| / 448 for dynamic per-tensor activations).
   */
  public void quantize(CUdeviceptr qa, CUdeviceptr aScales, CUdeviceptr a, int m, int kDim, Fp8Matrix w) {
    check(m, kDim);
    if (kDim % 16 != 0) throw new IllegalArgumentException("FP8 activations need K a multiple of 16, got " + kDim);
    CUdeviceptr fixed = null;
    if (w.activations() == Activations.STATIC_TENSOR) {
      fixed = w.inputScale().ptr();
    } else if (w.activations() == Activations.DYNAMIC_TENSOR) {
      k.fillF32(amax.ptr(), 1, 0f);
      l.launch("fp8_amax", (int) Math.min(4L * k.smCount(), ((long) m * kDim + 1023) / 1024), 1, 1, 1024, 0, amax.ptr(),
          a, (long) m * kDim);
      l.launch("fp8_scale_of_amax", 1, 1, 1, 32, 0, amax.ptr());
      fixed = amax.ptr();
    }
    if (w.block()) {
      int perRow = w.activations() == Activations.DYNAMIC_TOKEN ? 1 : 0;
      l.launch("quant_fp8_groups", m, 1, 1, 256, 0, qa, aScales, a, kDim, fixed, perRow);
    } else {
      l.launch("quant_fp8_rows", m, 1, 1, 256, 0, qa, aScales, a, kDim, fixed);
    }
  }

  /**
   * out (m, n) = qa (m, k) e4m3 . w^T with both operands' scales (+ bias), on sm_90a: a persistent
   * grid of at most one block per multiprocessor; mode OUT_SWIGLU (per-row weights only) writes
   * (m, n / 2) bf16.
   */
  public void gemm(CUdeviceptr out, int mode, CUdeviceptr qa, CUdeviceptr aScales, Fp8Matrix w, CUdeviceptr bias,
                   int m, int n, int kDim) {
    if (kDim % 16 != 0) throw new IllegalArgumentException("the FP8 GEMM needs K a multiple of 16, got " + kDim);
    TensorMaps maps = k.maps();
    if (w.block()) {
      if (mode == Kernels.OUT_SWIGLU) throw new IllegalArgumentException("block-scaled weights have no fused SwiGLU");
      CUdeviceptr ma = maps.matrixBytes(qa, m, kDim, kDim, 128), mw = maps.matrixBytes(w.values().ptr(), n, kDim, kDim, 128);
      long tiles = (long) ((m + 127) / 128) * ((n + 127) / 128);
      l.launch("gemm_fp8_block_sm90", (int) Math.min(tiles, k.smCount()), 1, 1, Hopper.THREADS, GEMM_BLOCK_SMEM, ma,
          mw, out, aScales, w.scales().ptr(), bias, m, n, kDim, mode, Hopper.gemmRowGroup(m));
    } else {
      int wBox = mode == Kernels.OUT_SWIGLU ? 128 : 256;
      CUdeviceptr ma = maps.matrixBytes(qa, m, kDim, kDim, 128), mw = maps.matrixBytes(w.values().ptr(), n, kDim, kDim, wBox);
      long tiles = (long) ((m + 127) / 128) * (mode == Kernels.OUT_SWIGLU ? n / 2 / 128 : (n + 255) / 256);
      l.launch("gemm_fp8_sm90", (int) Math.min(tiles, k.smCount()), 1, 1, Hopper.THREADS, GEMM_SMEM, ma, mw, out,
          aScales, w.scales().ptr(), bias, m, n, kDim, mode, Hopper.gemmRowGroup(m));
    }
  }

  /** out (m, n) = a (m, k) bf16 . dequant(w)^T (+ bias) for 1 <= m <= 8 (decode): gemv_fp8, 2 columns a block. */
  public void gemv(CUdeviceptr out, int mode, CUdeviceptr a, Fp8Matrix w, CUdeviceptr bias, int m, int n, int kDim) {
    gemv(out, mode, a, w.values().ptr(), w.scales().ptr(), w.block(), bias, m, n, kDim);
  }

  /** {@link #gemv} on weights (n, k) e4m3 and scales given by address (benchmarks rotate copies of the weights). */
  public void gemv(CUdeviceptr out, int mode, CUdeviceptr a, CUdeviceptr values, CUdeviceptr wScales, boolean block,
                   CUdeviceptr bias, int m, int n, int kDim) {
    if (m < 1 || m > Kernels.GEMV_MAX_ROWS) throw new IllegalArgumentException("gemv_fp8 takes 1-8 rows, got " + m);
    if (kDim % 16 != 0) throw new IllegalArgumentException("gemv_fp8 needs K a multiple of 16, got " + kDim);
    l.launch("gemv_fp8", (n + 1) / 2, 1, 1, 256, 0, out, a, values, wScales, block ? 1 : 0, bias, m, n, kDim, mode);
  }

  private void check(int m, int kDim) {
    if (m > maxRows || kDim > maxK) {
      throw new IllegalArgumentException("FP8 activations of (" + m + ", " + kDim + ") exceed the scratch of (" + maxRows
          + ", " + maxK + ")");
    }
  }

  @Override
  public void close() {
    q.close();
    scales.close();
    amax.close();
  }
}
