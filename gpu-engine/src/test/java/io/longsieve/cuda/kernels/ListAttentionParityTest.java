package io.longsieve.cuda.kernels;

import static io.longsieve.cuda.Gpu.assertClose;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.policy.ListAttentionRef;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.GpuTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * ListKernels against cpu/policy/ListAttention on the CPU (through the test-side ListAttentionRef):
 * every path (tensor-core decode, gather + dense prefill, CUDA cores), compact and original
 * positions, shared and per-KV-head lists, with and without a logit bias, a shuffled page table.
 */
@Tag("gpu")
class ListAttentionParityTest extends GpuTest {

  /** Keys and queries pass through bf16 (compact keys are rotated then rounded), P through bf16: 2e-2. */
  static final double TOL = 2e-2;

  /** A layer of random keys/values on the CPU and on the device (shuffled pages), plus its RoPE. */
  record Setup(ModelConfig c, Rope rope, KvCache cpu, Kernels.KvView view, DeviceBuffer invFreq) {}

  static Setup setup(Random r, int d, int heads, int kvHeads, int total, boolean bias) {
    ModelConfig c = DeviceCaches.config(1, heads, kvHeads, d, 0);
    Rope rope = new Rope(c);
    int kvDim = c.kvDim();
    float[] k = Gpu.random(r, total * kvDim, 1), v = Gpu.random(r, total * kvDim, 1);
    KvCache cpu = new KvCache(c, rope, total);
    cpu.append(0, k, 0, v, 0, total, 0);

    int[] table = DeviceCaches.shuffledTable(r, DeviceCaches.pages(total, 3));
    DeviceBuffer biasDev = null;
    if (bias) {
      float[] b = cpu.logitBias(0);
      for (int i = 0; i < total * heads; i++) b[i] = (float) (r.nextGaussian() * 1.5);  // (slot, query head)
      biasDev = gpu.f32(b);
    }
    Kernels.KvView view = DeviceCaches.layer(gpu, table, kvHeads, d, true, biasDev).view();
    DeviceBuffer invFreq = gpu.f32(rope.inverseFrequencies());
    DeviceCaches.append(gpu, view, k, v, total, kvDim, 0, 0, invFreq);
    return new Setup(c, rope, cpu, view, invFreq);
  }

  /** nLists ascending random lists of listLen distinct slots in [0, total). */
  static int[] lists(Random r, int nLists, int listLen, int total) {
    int[] out = new int[nLists * listLen];
    for (int l = 0; l < nLists; l++) {
      List<Integer> all = new ArrayList<>();
      for (int i = 0; i < total; i++) all.add(i);
      Collections.shuffle(all, r);
      int[] pick = all.subList(0, listLen).stream().mapToInt(Integer::intValue).sorted().toArray();
      System.arraycopy(pick, 0, out, l * listLen, listLen);
    }
    return out;
  }

  /** Queries (n, heads, d) rotated on the CPU at pos(i) and rounded to bf16 (what the GPU gets). */
  static float[] queries(Random r, Rope rope, int n, int heads, int d, java.util.function.IntUnaryOperator pos) {
    float[] q = Gpu.random(r, n * heads * d, 1);
    for (int i = 0; i < n; i++) rope.rotate(q, i * heads * d, heads, pos.applyAsInt(i));
    for (int i = 0; i < q.length; i++) q[i] = Gpu.roundBf16(q[i]);
    return q;
  }

  @ParameterizedTest(name = "d={0} heads={1}/{2} n={3} list={4} of {5} perHead={6} compact={7} bias={8}")
  @CsvSource({
      "128, 32, 8, 1, 2688, 20000, false, false, false", "128, 32, 8, 1, 2688, 20000, false, true, false",
      "128, 32, 8, 1, 700, 5000, true, true, true", "128, 32, 8, 3, 700, 5000, true, false, true",
      "128, 8, 8, 3, 300, 2000, false, true, false", "128, 64, 4, 1, 500, 2000, false, true, true",
      "128, 32, 8, 512, 1200, 4000, false, true, false", "128, 32, 8, 512, 1200, 4000, true, false, false",
      "128, 16, 4, 512, 700, 3000, false, true, true",
      // tensor-core decode splits longer than a warp's buffers (tiles reuse them): 8 rows x 8 KV heads (7 tiles per
      // warp, one buffer), and one KV head over a 60000-entry list (3 tiles per warp through two buffers)
      "128, 32, 8, 8, 2688, 8000, true, false, true", "128, 8, 1, 1, 60000, 70000, false, false, false",
      "128, 8, 1, 1, 60000, 70000, false, true, false",
      "64, 32, 4, 1, 1000, 6000, true, true, false", "64, 16, 4, 3, 500, 3000, false, false, true",
      "64, 8, 2, 512, 900, 2000, true, true, false", "64, 8, 1, 9, 64, 64, false, true, false",
      "16, 8, 2, 1, 300, 1000, false, true, false", "16, 8, 1, 3, 300, 1000, false, true, true",
      "16, 32, 8, 512, 700, 2000, true, false, true", "16, 16, 1, 3, 200, 600, false, true, true",
      "16, 4, 4, 512, 512, 512, false, true, false",
      "8, 4, 2, 3, 100, 300, false, true, false", "256, 8, 2, 3, 200, 600, true, true, true",
      "32, 12, 3, 1, 150, 400, true, false, false"})
  void matchesCpuListAttention(int d, int heads, int kvHeads, int n, int listLen, int total, boolean perHead,
                               boolean compact, boolean bias) {
    Random r = new Random(d * 7919L + heads * 31L + n * 13L + listLen + (compact ? 1 : 0) + (bias ? 2 : 0));
    Setup s = setup(r, d, heads, kvHeads, total, bias);
    int nLists = perHead ? kvHeads : 1;
    int[] lists = lists(r, nLists, listLen, total);
    // compact rows sit at list positions; original rows at their own slots (the last n entries of list 0)
    float[] q = queries(r, s.rope(), n, heads, d, i -> compact ? listLen - n + i : lists[listLen - n + i]);
    float scale = (float) (1.0 / Math.sqrt(d));
    float[] ref = ListAttentionRef.attend(s.cpu(), s.rope(), q, lists, nLists, listLen, n, heads, compact, scale);

    DeviceBuffer cos = gpu.alloc((long) listLen * d / 2 * 4), sin = gpu.alloc((long) listLen * d / 2 * 4);
    DeviceBuffer qDev = gpu.bf16(q), listDev = gpu.ints(lists);
    ListKernels.Path path = ListKernels.plan(n, listLen, d, heads / kvHeads, kvHeads, bias, gpu.k.smCount()).path();
    try (ListKernels lk = new ListKernels(gpu.k, gpu.ctx)) {
      lk.ropeTable(cos.ptr(), sin.ptr(), s.invFreq().ptr(), listLen, d / 2);
      // the tensor-core decode kernel merges its splits itself, or leaves it to attn_combine: both must agree;
      // the fused one runs twice (its arrival counters must be back at zero after a call)
      boolean[] fused = path == ListKernels.Path.TC_DECODE ? new boolean[] {true, true, false} : new boolean[] {true};
      for (boolean f : fused) {
        lk.fusedCombine(f);
        DeviceBuffer out = gpu.poisoned((long) n * heads * d * 2, true);
        lk.attend(out.ptr(), qDev.ptr(), s.view(), listDev.ptr(), nLists, listLen, n, heads, compact, cos.ptr(),
            sin.ptr(), s.invFreq().ptr(), scale);
        assertClose(gpu.readBf16(out, n * heads * d), ref, TOL,
            path + (f ? " fused" : "") + (compact ? " compact" : "") + " list attention");
      }
    }
  }

  @ParameterizedTest(name = "d={0} heads={1}/{2} n={3} slots={4}")
  @CsvSource({"128, 32, 8, 1, 3000", "128, 32, 8, 3, 3000", "128, 8, 2, 100, 900", "64, 16, 4, 1, 777",
      "16, 8, 2, 3, 500", "16, 8, 2, 40, 300"})
  void listOfEverySlotIsDenseAttention(int d, int heads, int kvHeads, int n, int slots) {
    Random r = new Random(slots * 17L + d + n);
    Setup s = setup(r, d, heads, kvHeads, slots, false);
    int[] all = new int[slots];
    for (int i = 0; i < slots; i++) all[i] = i;
    float[] q = queries(r, s.rope(), n, heads, d, i -> slots - n + i);
    DeviceBuffer qDev = gpu.bf16(q);
    float scale = (float) (1.0 / Math.sqrt(d));
    DeviceBuffer dense = gpu.poisoned((long) n * heads * d * 2, true), list = gpu.poisoned((long) n * heads * d * 2, true);
    try (ListKernels lk = new ListKernels(gpu.k, gpu.ctx); Kernels.Workspace ws = new Kernels.Workspace(gpu.ctx)) {
      gpu.k.attention(dense.ptr(), qDev.ptr(), s.view(), n, heads, slots - n, 0, scale, ws);
      lk.attend(list.ptr(), qDev.ptr(), s.view(), gpu.ints(all).ptr(), 1, slots, n, heads, false, null, null, null,
          scale);
      assertClose(gpu.readBf16(list, n * heads * d), gpu.readBf16(dense, n * heads * d), TOL, "list of every slot");
    }
  }

  @Test
  void ropeTableIsBitIdenticalToTheCpuAngles() {
    int d = 128, half = d / 2, positions = 5000;
    Setup s = setup(new Random(3), d, 4, 2, 64, false);
    DeviceBuffer cos = gpu.poisoned((long) positions * half * 4, false), sin = gpu.poisoned((long) positions * half * 4, false);
    try (ListKernels lk = new ListKernels(gpu.k, gpu.ctx)) {
      lk.ropeTable(cos.ptr(), sin.ptr(), s.invFreq().ptr(), positions, half);
      float[] gc = gpu.readF32(cos, positions * half), gs = gpu.readF32(sin, positions * half);
      float[] c = new float[half], sn = new float[half];
      for (int p = 0; p < positions; p += 7) {
        s.rope().angles(p, c, sn);
        assertArrayEquals(c, java.util.Arrays.copyOfRange(gc, p * half, (p + 1) * half), 0f, "cos at " + p);
        assertArrayEquals(sn, java.util.Arrays.copyOfRange(gs, p * half, (p + 1) * half), 0f, "sin at " + p);
      }
    }
  }
}
