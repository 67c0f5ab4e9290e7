package io.longsieve.cuda.kernels;

import static io.longsieve.cuda.Gpu.assertClose;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.GpuPoolTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.model.QuantizationConfig.Activations;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The FP8 kernels (fp8/fp8.cu, hopper/gemm_fp8_sm90.cu) against their CPU twins (Fp8Ref, CpuOps.matmul)
 * on random sizes, NaN-poisoned outputs. Tolerances:
 * <ul>
 *   <li>activation quantization: bytes and scales equal (the same fp32 division and the same
 *       round-to-nearest-even saturating cast);
 *   <li>FP8 GEMM against the CPU product of the same dequantized operands: 1e-3 relative for the block
 *       kernel (it promotes each 128-product partial sum to f32), 5e-3 for the per-row kernel, which keeps
 *       the whole K in the tensor cores' FP8 accumulators (about 14 significant bits on Hopper, DeepSeek-V3
 *       §3.3.2; what vLLM's CUTLASS FP8 kernels and torch._scaled_mm with use_fast_accum do); 1e-2 for bf16
 *       outputs;
 *   <li>FP8 GEMM against the product with the activations not quantized (what the CPU reference model
 *       computes): 0.06 relative. e4m3 keeps 4 significant bits, a relative rounding error of at most
 *       2^-4 and about 0.036 r.m.s. per element; summed over K it stays near that, so 0.06 catches a
 *       wrong scale (a factor) or a wrong block (tens of percent) while passing rounding;
 *   <li>FP8 GEMV (weights dequantized, activations as they are) against CpuOps.matmul: 1e-4.
 * </ul>
 */
@Tag("gpu")
class Fp8ParityTest extends GpuPoolTest {

  private static boolean hopper() {
    return gpu.k.hopper();
  }

  private static DeviceBuffer bytes(byte[] v) {
    DeviceBuffer b = gpu.alloc(v.length + 1L);
    short[] s = new short[(v.length + 1) / 2];
    for (int i = 0; i < v.length; i++) s[i / 2] |= (short) ((v[i] & 0xff) << (8 * (i % 2)));
    b.upload(s);
    return b;
  }

  private static byte[] readBytes(DeviceBuffer b, int n) {
    gpu.stream.synchronize();
    short[] s = b.downloadShorts((n + 1) / 2);
    byte[] v = new byte[n];
    for (int i = 0; i < n; i++) v[i] = (byte) (s[i / 2] >>> (8 * (i % 2)));
    return v;
  }

  private static Fp8Kernels fp8(int rows, int k) {
    return new Fp8Kernels(gpu.k, gpu.ctx, rows, k);
  }

  @ParameterizedTest(name = "block={0} act={1} m={2} k={3}")
  @CsvSource({"false, DYNAMIC_TOKEN, 37, 528", "false, STATIC_TENSOR, 9, 256", "false, DYNAMIC_TENSOR, 130, 1040",
      "true, DYNAMIC_GROUP, 37, 528", "true, DYNAMIC_TOKEN, 20, 384", "true, STATIC_TENSOR, 11, 272",
      "true, DYNAMIC_TENSOR, 64, 400"})
  void activationQuantizationMatchesItsTwinExactly(boolean block, Activations act, int m, int k) {
    assumeTrue(hopper(), "FP8 kernels run where the sm_90a kernels do");
    Random r = new Random(m * 31L + k);
    float[] x = Gpu.random(r, m * k, 3);
    x[5] = 0;  // a zero stays a zero
    Float fixed = act == Activations.STATIC_TENSOR ? 0.0123f : null;
    if (act == Activations.DYNAMIC_TENSOR) {
      float amax = 0;
      for (float v : x) amax = Math.max(amax, Math.abs(v));
      fixed = Fp8Ref.scaleOf(amax);
    }
    Fp8Ref.Quantized ref = block ? Fp8Ref.groups(x, m, k, fixed, act == Activations.DYNAMIC_TOKEN) : Fp8Ref.rows(x, m, k, fixed);
    DeviceBuffer in = act == Activations.STATIC_TENSOR ? gpu.f32(new float[] {fixed}) : null;
    Fp8Matrix w = new Fp8Matrix(null, null, block, act, in);
    DeviceBuffer q = gpu.poisoned(m * (long) k, false), s = gpu.poisoned(ref.scales().length * 4L, false);
    try (Fp8Kernels f = fp8(m, k)) {
      f.quantize(q.ptr(), s.ptr(), gpu.bf16(x).ptr(), m, k, w);
      assertArrayEquals(ref.q(), readBytes(q, m * k), "quantized bytes");
      assertArrayEquals(ref.scales(), gpu.readF32(s, ref.scales().length), "scales");
    }
  }

  @ParameterizedTest(name = "block={0} mode={1} m={2} n={3} k={4}")
  @CsvSource({"false, 0, 130, 520, 528", "false, 1, 300, 384, 256", "false, 2, 129, 264, 1040",
      "true, 0, 130, 512, 528", "true, 1, 300, 384, 256", "true, 2, 257, 256, 1040"})
  void gemmMatchesCpuOnTheDequantizedOperands(boolean block, int mode, int m, int n, int k) {
    assumeTrue(hopper(), "the FP8 GEMM runs on sm_90a");
    Random r = new Random(m + 7L * n + 13L * k);
    float[] a = Gpu.random(r, m * k, 1);
    byte[] wq = Fp8Ref.randomE4m3(r, n * k);
    int kb = (k + 127) / 128;
    float[] ws = Fp8Ref.randomScales(r, block ? (n / 128) * kb : n, 1.0 / (64 * Math.sqrt(k)));
    float[] bias = Gpu.random(r, n, 0.5);
    Activations act = block ? Activations.DYNAMIC_GROUP : Activations.DYNAMIC_TOKEN;
    Fp8Ref.Quantized qa = block ? Fp8Ref.groups(a, m, k, null, false) : Fp8Ref.rows(a, m, k, null);
    float[] aDeq = Fp8Ref.dequantize(qa.q(), qa.scales(), m, k, false, block);
    float[] wDeq = Fp8Ref.dequantize(wq, ws, n, k, block, false);
    float[] old = mode == Kernels.OUT_F32_ADD ? Gpu.random(r, m * n, 1) : null;
    float[] ref = new float[m * n], loose = new float[m * n];
    CpuOps.matmul(pool, ref, aDeq, m, wDeq, bias, n, k);
    CpuOps.matmul(pool, loose, a, m, wDeq, bias, n, k);
    if (old != null) {
      for (int i = 0; i < ref.length; i++) {
        ref[i] += old[i];
        loose[i] += old[i];
      }
    }
    Fp8Matrix w = new Fp8Matrix(bytes(wq), gpu.f32(ws), block, act, null);
    DeviceBuffer out = old != null ? gpu.f32(old) : gpu.poisoned((long) m * n * (mode == Kernels.OUT_BF16 ? 2 : 4),
        mode == Kernels.OUT_BF16);
    try (Fp8Kernels f = fp8(m, k)) {
      f.matmul(out.ptr(), mode, gpu.bf16(a).ptr(), w, gpu.f32(bias).ptr(), m, n, k);
      float[] got = mode == Kernels.OUT_BF16 ? gpu.readBf16(out, m * n) : gpu.readF32(out, m * n);
      String what = (block ? "gemm_fp8_block_sm90 " : "gemm_fp8_sm90 ") + m + "x" + n + "x" + k + " mode " + mode;
      assertClose(got, ref, mode == Kernels.OUT_BF16 ? 1e-2 : block ? 1e-3 : 5e-3, what + " vs the dequantized operands");
      assertClose(got, loose, 0.06, what + " vs unquantized activations");
    }
  }

  @Test
  void fusedSwigluGivesTheUnfusedBits() {
    assumeTrue(hopper(), "the FP8 GEMM runs on sm_90a");
    int m = 200, hidden = 256, k = 384;
    Random r = new Random(3);
    float[] a = Gpu.random(r, m * k, 1);
    byte[] wq = Fp8Ref.randomE4m3(r, 2 * hidden * k);
    Fp8Matrix w = new Fp8Matrix(bytes(wq), gpu.f32(Fp8Ref.randomScales(r, 2 * hidden, 1.0 / (64 * Math.sqrt(k)))), false,
        Activations.DYNAMIC_TOKEN, null);
    DeviceBuffer fused = gpu.poisoned((long) m * hidden * 2, true), unfused = gpu.poisoned((long) m * hidden * 2, true);
    DeviceBuffer gu = gpu.poisoned((long) m * 2 * hidden * 2, true), ad = gpu.bf16(a);
    try (Fp8Kernels f = fp8(m, k)) {
      assumeTrue(f.fusesSwiglu(m, hidden, w));
      f.gateUpSwiglu(fused.ptr(), gu.ptr(), ad.ptr(), w, m, hidden, k);
      f.matmul(gu.ptr(), Kernels.OUT_BF16, ad.ptr(), w, null, m, 2 * hidden, k);
      gpu.k.swiglu(unfused.ptr(), gu.ptr(), m, hidden);
      assertArrayEquals(gpu.readBf16(unfused, m * hidden), gpu.readBf16(fused, m * hidden), "fused vs unfused SwiGLU");
    }
  }

  @ParameterizedTest(name = "block={0} n={1} k={2}")
  @CsvSource({"false, 520, 528", "false, 1000, 4096", "true, 384, 528", "true, 1024, 1040"})
  void gemvMatchesCpuOnDequantizedWeightsAndIgnoresTheBatch(boolean block, int n, int k) {
    assumeTrue(hopper(), "FP8 weights stay FP8 where the sm_90a kernels run");
    Random r = new Random(n * 3L + k);
    byte[] wq = Fp8Ref.randomE4m3(r, n * k);
    int kb = (k + 127) / 128;
    float[] ws = Fp8Ref.randomScales(r, block ? (n / 128) * kb : n, 1.0 / (64 * Math.sqrt(k)));
    float[] wDeq = Fp8Ref.dequantize(wq, ws, n, k, block, false);
    Fp8Matrix w = new Fp8Matrix(bytes(wq), gpu.f32(ws), block, Activations.DYNAMIC_TOKEN, null);
    float[] a = Gpu.random(r, 8 * k, 1), bias = Gpu.random(r, n, 0.5);
    DeviceBuffer ad = gpu.bf16(a), bd = gpu.f32(bias);
    try (Fp8Kernels f = fp8(8, k)) {
      float[] row0 = null;
      for (int m = 1; m <= 8; m++) {
        float[] ref = new float[m * n];
        CpuOps.matmul(pool, ref, java.util.Arrays.copyOf(a, m * k), m, wDeq, bias, n, k);
        DeviceBuffer out = gpu.poisoned((long) m * n * 4, false);
        f.gemv(out.ptr(), Kernels.OUT_F32, ad.ptr(), w, bd.ptr(), m, n, k);
        float[] got = gpu.readF32(out, m * n);
        assertClose(got, ref, 1e-4, "gemv_fp8 m=" + m + " n=" + n + " k=" + k);
        float[] first = java.util.Arrays.copyOf(got, n);
        if (row0 == null) row0 = first;
        else assertArrayEquals(row0, first, "row 0 alone and in a batch of " + m);
      }
    }
  }
}
