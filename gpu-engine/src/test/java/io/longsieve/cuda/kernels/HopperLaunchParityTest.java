package io.longsieve.cuda.kernels;

import static io.longsieve.cuda.Gpu.assertClose;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.GpuPoolTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.driver.Launcher;
import io.longsieve.cuda.driver.TensorMaps;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The launch path of the sm_90a kernels on an H100/H200: gemm_sm90 launched through the engine
 * (tensor maps encoded through JNA, in device memory), with packed and per-argument launches alike,
 * matches the CPU. The standalone check (tools/gpu_host/sm90_check.cu) launched the same kernels
 * through the runtime; this is the engine's own path.
 */
@Tag("gpu")
class HopperLaunchParityTest extends GpuPoolTest {

  @ParameterizedTest(name = "packed={0}")
  @ValueSource(booleans = {true, false})
  void gemmThroughTheEngineMatchesCpu(boolean packed) {
    assumeTrue(gpu.module.hasHopper() && TensorMaps.available(), "an H100/H200 with the sm_90a module");
    int m = 300, n = 520, k = 264;
    Random r = new Random(7);
    float[] a = Gpu.random(r, m * k, 1), w = Gpu.random(r, n * k, 1.0 / Math.sqrt(k));
    DeviceBuffer out = gpu.poisoned((long) m * n * 4, false);
    boolean was = Launcher.packed;
    try {
      Launcher.packed = packed;
      new Kernels(gpu.module, gpu.stream, true).gemm(out.ptr(), Kernels.OUT_F32, gpu.bf16(a).ptr(), gpu.bf16(w).ptr(),
          null, m, n, k);
      gpu.stream.synchronize();
    } finally {
      Launcher.packed = was;
    }
    float[] ref = new float[m * n];
    CpuOps.matmul(pool, ref, a, m, w, null, n, k);
    assertClose(gpu.readF32(out, m * n), ref, 1e-4, "gemm_sm90 " + m + "x" + n + "x" + k);
  }
}
