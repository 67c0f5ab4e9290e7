package io.longsieve.cuda.kernels;

import static io.longsieve.cuda.Gpu.assertClose;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.policy.AttentionContext;
import io.longsieve.cpu.policy.DenseAttention;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.GpuPoolTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Flash prefill and flash decoding (tensor cores) and the split-K CUDA-core kernel (any head size)
 * against DenseAttention on the CPU:
 * causal, GQA, a chunk that starts after earlier cached tokens, sliding windows, and a shuffled
 * page table so every access goes through the indirection. On an H100/H200 "flash" is the sm_90a
 * kernel (wgmma, TMA, GQA packing for 1, 2, 4 or 8 query heads per KV head; other groups fall back
 * to the sm_80 kernel), "flash80" the sm_80 one. The cache's spare slots are poisoned with NaN, so
 * a key past the end that leaks into P V fails the check.
 */
@Tag("gpu")
class AttentionParityTest extends GpuPoolTest {

  /** Queries and keys pass through bf16 twice (RoPE output, P in P·V): allow 2e-2. */
  static final double TOL = 2e-2;

  @ParameterizedTest(name = "{0}: d={1} heads={2}/{3} before={4} n={5} window={6}")
  @CsvSource({
      "flash, 128, 8, 2, 0, 200, 0", "flash, 128, 4, 4, 130, 77, 0", "flash, 64, 8, 1, 0, 129, 0",
      "flash, 64, 6, 2, 300, 64, 100", "flash, 128, 32, 8, 1000, 300, 0",
      "flash, 128, 32, 8, 0, 1000, 0", "flash, 128, 32, 8, 4000, 333, 0", "flash, 128, 16, 2, 77, 500, 0",
      "flash, 64, 12, 6, 100, 333, 0", "flash, 128, 32, 8, 1000, 700, 256", "flash, 128, 12, 4, 50, 200, 0",
      "flash, 128, 32, 8, 63, 1, 0", "flash, 64, 8, 8, 0, 128, 0",
      "flash80, 128, 8, 2, 0, 200, 0", "flash80, 64, 6, 2, 300, 64, 100", "flash80, 128, 32, 8, 1000, 300, 0",
      "split, 16, 4, 2, 0, 40, 0", "split, 8, 8, 2, 13, 20, 0", "split, 128, 32, 8, 0, 3, 0",
      "split, 16, 4, 2, 50, 30, 16",
      "split, 256, 16, 8, 0, 300, 128", "split, 256, 16, 8, 1500, 1, 1024", "split, 256, 8, 4, 700, 64, 0",
      "decode, 128, 32, 8, 5000, 1, 0", "decode, 128, 8, 1, 20000, 1, 0", "decode, 64, 28, 4, 3000, 1, 0",
      "decode, 16, 4, 2, 700, 1, 0", "decode, 128, 32, 8, 9000, 1, 4096",
      "fdecode, 128, 32, 8, 5000, 1, 0", "fdecode, 128, 8, 1, 20000, 1, 0", "fdecode, 64, 28, 4, 3000, 1, 0",
      "fdecode, 128, 32, 8, 9000, 1, 4095", "fdecode, 64, 16, 1, 100, 1, 0", "fdecode, 128, 4, 2, 70, 3, 0",
      "fdecode, 128, 32, 8, 40000, 1, 0"})
  void matchesDenseAttention(String path, int d, int heads, int kvHeads, int before, int n, int window) {
    Random r = new Random(d * 7919L + heads * 31L + before + n);
    ModelConfig c = DeviceCaches.config(1, heads, kvHeads, d, window);
    Rope rope = new Rope(c);
    int total = before + n, kvDim = c.kvDim(), qDim = c.qDim();
    float[] k = Gpu.random(r, total * kvDim, 1), v = Gpu.random(r, total * kvDim, 1);
    float[] q = Gpu.random(r, n * qDim, 1);

    KvCache cpu = new KvCache(c, rope, total);
    cpu.append(0, k, 0, v, 0, total, 0);
    float[] ref = new float[n * qDim];
    new DenseAttention().prefill(0, q, n, before, cpu, ref, new AttentionContext(c, rope, pool));

    // device cache with a shuffled page table
    int[] table = DeviceCaches.shuffledTable(r, DeviceCaches.pages(total, 3));
    Kernels.KvView view = DeviceCaches.layer(gpu, table, kvHeads, d, false, null).view();
    DeviceBuffer invFreq = gpu.f32(rope.inverseFrequencies());
    DeviceCaches.append(gpu, view, k, v, total, kvDim, 0, 0, invFreq);
    DeviceBuffer qDev = gpu.poisoned((long) n * qDim * 2, true);
    gpu.k.rope(qDev.ptr(), gpu.f32(q).ptr(), qDim, n, heads, d, invFreq.ptr(), null, before);

    DeviceBuffer out = gpu.poisoned((long) n * qDim * 2, true);
    float scale = (float) (1.0 / Math.sqrt(d));
    try (Kernels.Workspace ws = new Kernels.Workspace(gpu.ctx)) {
      if (path.equals("flash80")) gpu.k80.flashPrefill(out.ptr(), qDev.ptr(), view, n, heads, before, window, scale);
      else if (path.equals("flash")) gpu.k.flashPrefill(out.ptr(), qDev.ptr(), view, n, heads, before, window, scale);
      else if (path.equals("fdecode")) gpu.k.flashDecode(out.ptr(), qDev.ptr(), view, n, heads, before, window, scale, ws);
      else gpu.k.splitAttention(out.ptr(), qDev.ptr(), view, n, heads, before, window, scale, ws);
      assertClose(gpu.readBf16(out, n * qDim), ref, TOL, path + " attention");
    }
  }
}
