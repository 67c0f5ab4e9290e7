package io.longsieve.cuda.kernels;

import static io.longsieve.cuda.Gpu.BF16_TOLERANCE;
import static io.longsieve.cuda.Gpu.assertClose;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.GpuTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.kv.PagedKvCacheReader;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.model.RopeScaling;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Embedding, RMSNorm, RoPE, KV append and SwiGLU kernels against their CPU twins. */
@Tag("gpu")
class ElementwiseParityTest extends GpuTest {

  /** A config with the given head layout; llama3 RoPE scaling so every frequency regime is hit. */
  static ModelConfig config(int heads, int kvHeads, int headDim, int layers) {
    return new ModelConfig("llama", heads * headDim, 4 * headDim, layers, heads, kvHeads, headDim, 512, 1e-5, 500000,
        new RopeScaling("llama3", 8, 1, 4, 8192), 131072, false, false, 0, 1, List.of(2));
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 7, 64})
  void embedGathersRows(int n) {
    Random r = new Random(n);
    int vocab = 300, dim = 96;
    float[] table = Gpu.random(r, vocab * dim, 1);
    int[] ids = new int[n];
    for (int i = 0; i < n; i++) ids[i] = r.nextInt(vocab);
    DeviceBuffer out = gpu.poisoned(n * dim * 4L, false);
    gpu.k.embed(out.ptr(), gpu.bf16(table).ptr(), gpu.ints(ids).ptr(), n, dim, vocab);
    float[] ref = new float[n * dim];
    for (int i = 0; i < n; i++) CpuOps.embed(ref, i * dim, table, ids[i], dim);
    assertArrayEquals(ref, gpu.readF32(out, n * dim), "bf16 table rows widen exactly");
  }

  @ParameterizedTest
  @ValueSource(ints = {64, 1000, 4096})
  void rmsNormMatchesCpu(int dim) {
    Random r = new Random(dim);
    int n = 5;
    float[] x = Gpu.random(r, n * dim, 3), w = Gpu.random(r, dim, 1);
    DeviceBuffer out = gpu.poisoned(n * dim * 2L, true);
    gpu.k.rmsNorm(out.ptr(), gpu.f32(x).ptr(), gpu.f32(w).ptr(), n, dim, 1e-5);
    float[] ref = new float[n * dim];
    for (int i = 0; i < n; i++) CpuOps.rmsNorm(ref, i * dim, x, i * dim, w, dim, 1e-5);
    assertClose(gpu.readBf16(out, n * dim), ref, BF16_TOLERANCE, "rmsnorm dim " + dim);
  }

  @ParameterizedTest
  @ValueSource(ints = {8, 16, 64, 128})
  void ropeAtOriginalAndListPositions(int headDim) {
    Random r = new Random(headDim);
    ModelConfig c = config(4, 2, headDim, 1);
    Rope rope = new Rope(c);
    int n = 9, heads = c.numHeads(), width = heads * headDim, stride = width + 8;
    float[] in = Gpu.random(r, n * stride, 1);
    DeviceBuffer invFreq = gpu.f32(rope.inverseFrequencies());
    // original positions: row i at pos0 + i, far out so the llama3 long-wavelength band matters
    int pos0 = 100_000;
    DeviceBuffer out = gpu.poisoned(n * width * 2L, true);
    gpu.k.rope(out.ptr(), gpu.f32(in).ptr(), stride, n, heads, headDim, invFreq.ptr(), null, pos0);
    assertClose(gpu.readBf16(out, n * width), cpuRope(rope, in, n, stride, width, i -> pos0 + i), BF16_TOLERANCE,
        "rope original positions");
    // list-index positions (TokenSelect's compact positions) and arbitrary explicit ones
    int[] positions = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    int[] scattered = {5, 0, 70_000, 12, 131_000, 3, 9, 8191, 8192};
    for (int[] pos : new int[][] {positions, scattered}) {
      DeviceBuffer out2 = gpu.poisoned(n * width * 2L, true);
      gpu.k.rope(out2.ptr(), gpu.f32(in).ptr(), stride, n, heads, headDim, invFreq.ptr(), gpu.ints(pos).ptr(), 0);
      assertClose(gpu.readBf16(out2, n * width), cpuRope(rope, in, n, stride, width, i -> pos[i]), BF16_TOLERANCE,
          "rope explicit positions");
    }
  }

  private static float[] cpuRope(Rope rope, float[] in, int n, int stride, int width,
                                 java.util.function.IntUnaryOperator pos) {
    float[] ref = new float[n * width];
    for (int i = 0; i < n; i++) {
      System.arraycopy(in, i * stride, ref, i * width, width);
      rope.rotate(ref, i * width, width / rope.headDim(), pos.applyAsInt(i));
    }
    return ref;
  }

  @ParameterizedTest
  @ValueSource(ints = {16, 128})
  void kvAppendStoresKeysBeforeAndAfterRope(int headDim) {
    Random r = new Random(headDim + 1);
    ModelConfig c = config(8, 2, headDim, 2);
    Rope rope = new Rope(c);
    int kvDim = c.kvDim(), first = 70, second = 5, total = first + second;
    float[] rows = Gpu.random(r, total * 2 * kvDim, 1);  // per row: k (kvDim) then v (kvDim)
    KvCache cpu = new KvCache(c, rope, 256);
    try (PagedKvCache kv = new PagedKvCache(gpu.ctx, c, 256)) {
      DeviceBuffer invFreq = gpu.f32(rope.inverseFrequencies());
      DeviceBuffer dev = gpu.f32(rows);
      int layer = 1;
      // two appends, the second at slot 70 / position 70, as prefill then decode do
      for (int[] part : new int[][] {{0, first}, {first, second}}) {
        gpu.k.kvAppend(kv.layer(layer), dev.at((long) part[0] * 2 * kvDim * 4), 2 * kvDim, 0, kvDim, part[1], part[0],
            part[0], invFreq.ptr());
        kv.advance(layer, part[1]);
        float[] k = new float[part[1] * kvDim], v = new float[part[1] * kvDim];
        for (int i = 0; i < part[1]; i++) {
          System.arraycopy(rows, (part[0] + i) * 2 * kvDim, k, i * kvDim, kvDim);
          System.arraycopy(rows, (part[0] + i) * 2 * kvDim + kvDim, v, i * kvDim, kvDim);
        }
        cpu.append(layer, k, 0, v, 0, part[1], part[0]);
      }
      float[][] got = PagedKvCacheReader.read(gpu, kv, layer, total);
      assertArrayEquals(slice(cpu.keys[layer], total * kvDim), got[0], "keys before RoPE are stored as given (bf16 inputs)");
      assertClose(got[1], slice(cpu.ropedKeys[layer], total * kvDim), BF16_TOLERANCE, "rotated keys");
      assertArrayEquals(slice(cpu.values[layer], total * kvDim), got[2], "values are stored as given");
    }
  }

  static float[] slice(float[] a, int n) {
    return java.util.Arrays.copyOf(a, n);
  }

  @ParameterizedTest
  @ValueSource(ints = {128, 160, 14336})
  void swigluMatchesCpu(int hidden) {
    Random r = new Random(hidden);
    int n = 3;
    float[] gu = Gpu.random(r, n * 2 * hidden, 2);
    DeviceBuffer out = gpu.poisoned((long) n * hidden * 2, true);
    gpu.k.swiglu(out.ptr(), gpu.bf16(gu).ptr(), n, hidden);
    float[] gate = new float[n * hidden], up = new float[n * hidden];
    for (int i = 0; i < n; i++) {
      System.arraycopy(gu, i * 2 * hidden, gate, i * hidden, hidden);
      System.arraycopy(gu, i * 2 * hidden + hidden, up, i * hidden, hidden);
    }
    CpuOps.swiglu(gate, up, n * hidden);
    assertClose(gpu.readBf16(out, n * hidden), gate, BF16_TOLERANCE, "swiglu");
  }
}
