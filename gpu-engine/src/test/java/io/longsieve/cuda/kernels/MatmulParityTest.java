package io.longsieve.cuda.kernels;

import static io.longsieve.cuda.Gpu.BF16_TOLERANCE;
import static io.longsieve.cuda.Gpu.assertClose;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.GpuPoolTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The tensor-core GEMM (prefill) and the GEMV (decode, 1-8 rows) against CpuOps.matmul, in every
 * output mode, at sizes that are and are not multiples of the tiles. On an H100/H200 {@code matmul}
 * runs the sm_90a kernel (wgmma + TMA); the sm_80 kernel is checked on the same cases through
 * {@code k80}.
 */
@Tag("gpu")
class MatmulParityTest extends GpuPoolTest {

  @ParameterizedTest(name = "m={0} n={1} k={2} mode={3} bias={4}")
  @CsvSource({
      "1, 64, 64, 0, false", "1, 4096, 4096, 0, true", "2, 1000, 264, 1, false", "3, 160, 64, 2, false",
      "8, 6144, 4096, 0, false", "5, 333, 1032, 1, true",
      "9, 64, 64, 0, true", "16, 192, 160, 2, false", "130, 300, 72, 1, false", "512, 1024, 1024, 0, false",
      "257, 6144, 4096, 2, true", "1000, 128, 14336, 1, false", "33, 333, 64, 2, true", "130, 77, 128, 0, true"})
  void matmulMatchesCpu(int m, int n, int k, int mode, boolean withBias) {
    check(gpu.k, m, n, k, mode, withBias);
  }

  @ParameterizedTest(name = "sm80 m={0} n={1} k={2} mode={3} bias={4}")
  @CsvSource({"9, 64, 64, 0, true", "130, 300, 72, 1, false", "257, 6144, 4096, 2, true", "1000, 128, 14336, 1, false",
      "130, 77, 128, 0, true"})
  void sm80GemmMatchesCpu(int m, int n, int k, int mode, boolean withBias) {
    check(gpu.k80, m, n, k, mode, withBias);
  }

  /** Shapes of the 8B model's prefill chunks (fused q/k/v, o, gate/up, down) at ragged row counts. */
  @ParameterizedTest(name = "8B shapes m={0} n={1} k={2} mode={3}")
  @CsvSource({"300, 6144, 4096, 0", "257, 4096, 4096, 1", "129, 28672, 4096, 2", "200, 4096, 14336, 1"})
  void prefillShapesMatchCpu(int m, int n, int k, int mode) {
    check(gpu.k, m, n, k, mode, false);
  }

  private void check(Kernels kernels, int m, int n, int k, int mode, boolean withBias) {
    Random r = new Random(31L * m + n + k);
    float[] a = Gpu.random(r, m * k, 1), w = Gpu.random(r, n * k, 1.0 / Math.sqrt(k));
    float[] bias = withBias ? Gpu.random(r, n, 0.5) : null;
    float[] base = Gpu.random(r, m * n, 1);  // what OUT_F32_ADD adds to
    DeviceBuffer out;
    if (mode == Kernels.OUT_F32_ADD) out = gpu.f32(base);
    else out = gpu.poisoned((long) m * n * (mode == Kernels.OUT_BF16 ? 2 : 4), mode == Kernels.OUT_BF16);
    kernels.matmul(out.ptr(), mode, gpu.bf16(a).ptr(), gpu.bf16(w).ptr(), withBias ? gpu.f32(bias).ptr() : null, m, n, k);
    float[] ref = new float[m * n];
    CpuOps.matmul(pool, ref, a, m, w, bias, n, k);
    if (mode == Kernels.OUT_F32_ADD) for (int i = 0; i < ref.length; i++) ref[i] += base[i];
    float[] got = mode == Kernels.OUT_BF16 ? gpu.readBf16(out, m * n) : gpu.readF32(out, m * n);
    // f32 outputs keep f32 accumulation error only; bf16 outputs add one rounding
    assertClose(got, ref, mode == Kernels.OUT_BF16 ? BF16_TOLERANCE : 1e-4, (m <= 8 ? "gemv" : "gemm") + " " + m + "x" + n + "x" + k);
  }

  /**
   * The gate/up projection with SwiGLU (fused into the sm_90a GEMM's epilogue for more than 8 rows):
   * the same bits as the unfused path (GEMM to bf16, then swiglu_rows) on this GPU, and within bf16
   * of the CPU's silu(gate) * up. 8B's hidden 14336 and a small multiple of 128; 8 rows stay unfused.
   */
  @ParameterizedTest(name = "gate/up + swiglu m={0} hidden={1} k={2}")
  @CsvSource({"8, 256, 128", "9, 256, 128", "130, 384, 192", "300, 1024, 512", "129, 14336, 4096"})
  void gateUpSwigluMatchesUnfusedAndCpu(int m, int hidden, int k) {
    Random r = new Random(7L * m + hidden + k);
    float[] a = Gpu.random(r, m * k, 1), wgu = Gpu.random(r, 2 * hidden * k, 1.0 / Math.sqrt(k));
    DeviceBuffer da = gpu.bf16(a), dw = gpu.bf16(wgu), gu = gpu.poisoned((long) m * 2 * hidden * 2, true);
    DeviceBuffer fused = gpu.poisoned((long) m * hidden * 2, true), plain = gpu.poisoned((long) m * hidden * 2, true);
    gpu.k.gateUpSwiglu(fused.ptr(), gu.ptr(), da.ptr(), dw.ptr(), m, hidden, k);
    gpu.k.matmul(gu.ptr(), Kernels.OUT_BF16, da.ptr(), dw.ptr(), null, m, 2 * hidden, k);
    gpu.k.swiglu(plain.ptr(), gu.ptr(), m, hidden);
    float[] got = gpu.readBf16(fused, m * hidden);
    assertArrayEquals(gpu.readBf16(plain, m * hidden), got,
        (gpu.k.fusesSwiglu(m, hidden) ? "fused" : "unfused") + " against gemm + swiglu_rows");

    float[] gateUp = new float[m * 2 * hidden], gate = new float[m * hidden], up = new float[m * hidden];
    CpuOps.matmul(pool, gateUp, a, m, wgu, null, 2 * hidden, k);
    for (int i = 0; i < m; i++) {
      System.arraycopy(gateUp, i * 2 * hidden, gate, i * hidden, hidden);
      System.arraycopy(gateUp, i * 2 * hidden + hidden, up, i * hidden, hidden);
    }
    CpuOps.swiglu(gate, up, m * hidden);
    assertClose(got, gate, 2 * BF16_TOLERANCE, "gate/up + swiglu " + m + "x" + hidden + "x" + k);
  }

  /**
   * The decode GEMV gives each row the bits it gets alone, whatever else its call holds (the batching
   * engine's "a request gets the tokens it gets alone" rests on it): the tensor-core kernel with 8 and
   * 16 warps, the CUDA-core kernel with 1, 2 and 4 columns (which change no bits); both within f32
   * accumulation of the CPU.
   */
  @ParameterizedTest(name = "gemv rows alone n={0} k={1}")
  @CsvSource({"4096, 4096", "6144, 4096", "333, 1032", "100, 14336", "17, 8"})
  void gemvRowsGetTheirBitsAlone(int n, int k) {
    Random r = new Random(5L * n + k);
    float[] a = Gpu.random(r, 8 * k, 1), w = Gpu.random(r, n * k, 1.0 / Math.sqrt(k));
    DeviceBuffer da = gpu.bf16(a), dw = gpu.bf16(w);
    DeviceBuffer bias = gpu.f32(Gpu.random(r, n, 0.5));
    float[] ref = new float[8 * n];
    CpuOps.matmul(pool, ref, a, 8, w, gpu.readF32(bias, n), n, k);
    String[] variants = {"mma 8", "mma 16", "simt 1", "simt 2", "simt 4"};
    float[][] together = new float[variants.length][];
    for (int v = 0; v < variants.length; v++) {
      together[v] = gemv(variants[v], da, dw, bias, 0, 8, n, k);
      for (int m : new int[] {1, 2, 3, 5}) {
        for (int row = 0; row < 8; row += m) {
          int rows = Math.min(m, 8 - row);
          float[] want = Arrays.copyOfRange(together[v], row * n, (row + rows) * n);
          assertArrayEquals(want, gemv(variants[v], da, dw, bias, row, rows, n, k),
              variants[v] + ", rows " + row + ".." + (row + rows - 1) + " of 8");
        }
      }
      assertClose(together[v], ref, 1e-4, "gemv " + variants[v] + " " + n + "x" + k);
    }
    assertArrayEquals(together[2], together[3], "CUDA-core GEMV, 1 and 2 columns");
    assertArrayEquals(together[2], together[4], "CUDA-core GEMV, 1 and 4 columns");
  }

  /** out (m, n) f32 for rows row.. of a (8, k), through "mma WARPS" or "simt COLUMNS". */
  private float[] gemv(String variant, DeviceBuffer a, DeviceBuffer w, DeviceBuffer bias, int row, int m, int n, int k) {
    DeviceBuffer out = gpu.poisoned((long) m * n * 4, false);
    var rows = a.at((long) row * k * 2);
    String[] f = variant.split(" ");
    int p = Integer.parseInt(f[1]);
    if (f[0].equals("mma")) gpu.k.gemvMma(out.ptr(), Kernels.OUT_F32, rows, w.ptr(), bias.ptr(), m, n, k, p);
    else gpu.k.gemvSimt(out.ptr(), Kernels.OUT_F32, rows, w.ptr(), bias.ptr(), m, n, k, p);
    return gpu.readF32(out, m * n);
  }

  @ParameterizedTest(name = "forced gemm m={0}")
  @CsvSource({"1", "4", "8"})
  void tensorCoreGemmHandlesSkinnyInputs(int m) {
    Random r = new Random(m);
    int n = 384, k = 512;
    float[] a = Gpu.random(r, m * k, 1), w = Gpu.random(r, n * k, 0.05);
    DeviceBuffer out = gpu.poisoned((long) m * n * 4, false);
    gpu.k.gemm(out.ptr(), Kernels.OUT_F32, gpu.bf16(a).ptr(), gpu.bf16(w).ptr(), null, m, n, k);
    float[] ref = new float[m * n];
    CpuOps.matmul(pool, ref, a, m, w, null, n, k);
    assertClose(gpu.readF32(out, m * n), ref, 1e-4, "gemm with " + m + " rows");
  }
}
