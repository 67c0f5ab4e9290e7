package io.longsieve.cuda.kernels;

import static io.longsieve.cuda.Gpu.BF16_TOLERANCE;
import static io.longsieve.cuda.Gpu.assertClose;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.FamilyOps;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.GpuTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The families' kernels (elementwise/family.cu, FamilyKernels) against their CPU twins
 * (cpu/kernels/FamilyOps, CpuOps.rmsNorm) on random inputs and sizes: per-head q/k RMSNorm in place
 * on qkv rows (head dims of Qwen3 and Gemma 3), GeGLU-tanh on bf16 gate/up, an RMSNorm added into
 * the residual, scaling and soft-capping. f32 outputs within 1e-5 relative, bf16 ones within bf16.
 */
@Tag("gpu")
class FamilyKernelsParityTest extends GpuTest {

  private static FamilyKernels fk() {
    return new FamilyKernels(gpu.k);
  }

  @ParameterizedTest
  @CsvSource({"1, 4, 2, 16", "7, 32, 8, 128", "3, 16, 8, 256", "65, 8, 1, 64"})
  void qkNormNormsEveryHeadInPlace(int n, int heads, int kvHeads, int d) {
    Random r = new Random(n * 31 + d);
    int qDim = heads * d, kvDim = kvHeads * d, stride = qDim + 2 * kvDim;
    float[] qkv = Gpu.random(r, n * stride, 4), wq = Gpu.random(r, d, 1), wk = Gpu.random(r, d, 1);
    DeviceBuffer dev = gpu.f32(qkv);
    fk().qkNorm(dev.ptr(), stride, n, heads, kvHeads, qDim, d, gpu.f32(wq).ptr(), gpu.f32(wk).ptr(), 1e-6);
    float[] ref = qkv.clone();
    FamilyOps.headNorm(ref, 0, n, stride, heads, d, wq, 1e-6);
    FamilyOps.headNorm(ref, qDim, n, stride, kvHeads, d, wk, 1e-6);   // values (after 2 kvDim) untouched
    assertClose(gpu.readF32(dev, n * stride), ref, 1e-5, "qk norm " + n + "x" + heads + "/" + kvHeads + "x" + d);
  }

  @ParameterizedTest
  @ValueSource(ints = {64, 1000, 15360})
  void gegluMatchesCpu(int hidden) {
    Random r = new Random(hidden);
    int n = 3;
    float[] gu = new float[n * 2 * hidden];
    float[] g = Gpu.random(r, n * 2 * hidden, 4);
    for (int i = 0; i < gu.length; i++) gu[i] = Gpu.roundBf16(g[i]);
    DeviceBuffer out = gpu.poisoned(n * hidden * 2L, true);
    fk().geglu(out.ptr(), gpu.bf16(gu).ptr(), n, hidden);
    float[] gate = new float[n * hidden], up = new float[n * hidden];
    for (int i = 0; i < n; i++) {
      System.arraycopy(gu, i * 2 * hidden, gate, i * hidden, hidden);
      System.arraycopy(gu, i * 2 * hidden + hidden, up, i * hidden, hidden);
    }
    FamilyOps.geglu(gate, up, n * hidden);
    assertClose(gpu.readBf16(out, n * hidden), gate, BF16_TOLERANCE, "geglu hidden " + hidden);
  }

  @ParameterizedTest
  @ValueSource(ints = {32, 3840, 5120})
  void rmsNormAddJoinsTheResidual(int dim) {
    Random r = new Random(dim);
    int n = 4;
    float[] x = Gpu.random(r, n * dim, 2), y = Gpu.random(r, n * dim, 3), w = Gpu.random(r, dim, 1);
    DeviceBuffer dx = gpu.f32(x);
    fk().rmsNormAdd(dx.ptr(), gpu.f32(y).ptr(), gpu.f32(w).ptr(), n, dim, 1e-6);
    float[] normed = new float[n * dim], ref = x.clone();
    for (int i = 0; i < n; i++) CpuOps.rmsNorm(normed, i * dim, y, i * dim, w, dim, 1e-6);
    for (int i = 0; i < ref.length; i++) ref[i] += normed[i];
    assertClose(gpu.readF32(dx, n * dim), ref, 1e-5, "rmsnorm add dim " + dim);
  }

  @Test
  void scaleAndSoftcap() {
    Random r = new Random(5);
    int n = 262208 + 17;  // Gemma's vocabulary and a ragged tail
    float[] v = Gpu.random(r, n, 60);
    DeviceBuffer d = gpu.f32(v);
    fk().scale(d.ptr(), n, 61.96773f);
    float[] ref = v.clone();
    FamilyOps.scale(ref, 0, n, 61.96773f);
    assertClose(gpu.readF32(d, n), ref, 1e-6, "scale");
    fk().softcap(d.ptr(), n, 30f);
    FamilyOps.softcap(ref, 0, n, 30f);
    assertClose(gpu.readF32(d, n), ref, 1e-5, "softcap 30");
  }
}
