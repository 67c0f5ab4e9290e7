package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.policy.AttentionContext;
import io.longsieve.cpu.policy.AttentionPolicy;
import io.longsieve.cpu.policy.ComposedPolicy;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.GpuPoolTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.DeviceCaches;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import io.longsieve.policy.SelectionStats;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * GpuQuest against cpu/policy/Quest on random caches behind a shuffled page table, over two decode
 * steps (the second after more tokens filled new pages, so the device bounds are extended, not
 * rebuilt): per head, the chosen pages equal the CPU rule's wherever the boundary scores are not
 * tied within bf16 rounding (overall overlap >= 97%), the outputs of heads with the same pages
 * agree to bf16 tolerance, and the statistics are equal.
 */
@Tag("gpu")
class QuestParityTest extends GpuPoolTest {

  static final double TOL = 2e-2;

  @ParameterizedTest(name = "d={0} heads={1}/{2} n={3} page={4} budget={5}")
  @CsvSource({"128, 32, 8, 5000, 16, 512", "16, 4, 2, 300, 8, 32", "64, 8, 1, 2000, 16, 256", "128, 8, 2, 700, 16, 64",
      "8, 8, 2, 130, 4, 12"})
  void matchesCpuQuest(int d, int heads, int kvHeads, int total, int page, int budget) {
    Random r = new Random(d * 131L + heads * 17L + total + page);
    ModelConfig c = DeviceCaches.config(1, heads, kvHeads, d, 0);
    Rope rope = new Rope(c);
    int extra = 2 * page + 3, cap = total + extra, kvDim = c.kvDim(), qDim = c.qDim();
    float[] k = Gpu.random(r, cap * kvDim, 1), v = Gpu.random(r, cap * kvDim, 1);
    KvCache cpu = new KvCache(c, rope, cap);
    AttentionContext actx = new AttentionContext(c, rope, pool);

    int[] table = DeviceCaches.shuffledTable(r, DeviceCaches.pages(cap, 2));
    Kernels.KvView view = DeviceCaches.layer(gpu, table, kvHeads, d, false, null).view();
    // the rows of all cap tokens at once; each step appends the next ones from them
    DeviceBuffer kvDev = gpu.f32(DeviceCaches.rows(k, v, cap, kvDim)), invFreq = gpu.f32(rope.inverseFrequencies());

    String policy = "quest:page=" + page + ",budget=" + budget + ",dense_layers=0";
    AttentionPolicy cq = ComposedPolicy.of(PolicySpec.parse(policy));
    SelectionStats gs = new SelectionStats(1);
    int compared = 0, same = 0, entries = 0;
    try (Kernels.Workspace ws = new Kernels.Workspace(gpu.ctx);
         GpuQuest gq = new GpuQuest(PolicySpec.parse(policy).decode(), gs, new GpuEnv(c, gpu.ctx, gpu.k, ws,
             invFreq.ptr(), null))) {
      int pick = gq.pick();
      int filled = 0;
      for (int n : new int[] {total, cap}) {
        cpu.append(0, k, filled * kvDim, v, filled * kvDim, n - filled, filled);
        gpu.k.kvAppend(view, kvDev.at((long) filled * 2 * kvDim * 4), 2 * kvDim, 0, kvDim, n - filled, filled, filled,
            invFreq.ptr());
        filled = n;
        int pos = n - 1, full = (n - 1) / page;
        assertTrue(!GpuQuest.dense(0, 0, pick + 1, full), "the test must be sparse");
        float[] q = Gpu.random(r, qDim, 1), ref = new float[qDim];
        cq.decode(0, q, pos, cpu, ref, actx);
        DeviceBuffer qPre = gpu.f32(q), qRot = gpu.poisoned(qDim * 2L, true), out = gpu.poisoned(qDim * 2L, true);
        gpu.k.rope(qRot.ptr(), qPre.ptr(), qDim, 1, heads, d, invFreq.ptr(), null, pos);
        gq.decode(new LayerCall(0, 1, pos, n - 1, qPre.ptr(), qDim, qRot.ptr(), view, out.ptr()));
        float[] got = gpu.readBf16(out, qDim);
        gpu.stream.synchronize();
        int[] chosen = new int[heads * pick];
        jcuda.driver.JCudaDriver.cuMemcpyDtoH(jcuda.Pointer.to(chosen), gq.chosenPages(), chosen.length * 4L);

        float[] qr = q.clone();
        rope.apply(qr, 0, heads, cosSin(rope, pos, true), cosSin(rope, pos, false));
        for (int h = 0; h < heads; h++) {
          int g = h / (heads / kvHeads);
          double[] score = new double[full];
          double[] noise = new double[full];  // bf16 rounding bound of each page score
          for (int p = 0; p < full; p++) {
            for (int i = 0; i < d; i++) {
              float mn = Float.POSITIVE_INFINITY, mx = Float.NEGATIVE_INFINITY;
              for (int s = p * page; s < (p + 1) * page; s++) {
                float x = cpu.ropedKeys[0][s * kvDim + g * d + i];
                mn = Math.min(mn, x);
                mx = Math.max(mx, x);
              }
              score[p] += Math.max((double) qr[h * d + i] * mn, (double) qr[h * d + i] * mx);
              noise[p] += Math.abs(qr[h * d + i]) * Math.max(Math.abs(mn), Math.abs(mx)) * 0x1p-7;
            }
          }
          Integer[] order = new Integer[full];
          for (int p = 0; p < full; p++) order[p] = p;
          Arrays.sort(order, (a, b) -> score[a] != score[b] ? Double.compare(score[b], score[a]) : Integer.compare(a, b));
          int[] want = new int[pick];
          for (int i = 0; i < pick; i++) want[i] = order[i];
          Arrays.sort(want);
          int[] have = Arrays.copyOfRange(chosen, h * pick, (h + 1) * pick);
          int last = order[pick - 1], next = order[pick];
          boolean clear = score[last] - score[next] > noise[last] + noise[next];
          int overlap = 0;
          for (int x : have) if (Arrays.binarySearch(want, x) >= 0) overlap++;
          same += overlap;
          entries += pick;
          for (int i = 1; i < pick; i++) assertTrue(have[i - 1] < have[i], "head " + h + " pages ascending and distinct");
          if (clear) assertEquals(Arrays.toString(want), Arrays.toString(have), "head " + h + " pages at n=" + n);
          if (Arrays.equals(want, have)) {
            Gpu.assertClose(Arrays.copyOfRange(got, h * d, (h + 1) * d), Arrays.copyOfRange(ref, h * d, (h + 1) * d),
                TOL, "head " + h + " output at n=" + n);
            compared++;
          }
        }
      }
      PolicyStats cs = cq.stats(), g = gs.snapshot();
      assertEquals(cs.attendedTokensMean(), g.attendedTokensMean(), 1e-9, "attended tokens mean");
      assertEquals(cs.selectedFractionByLayer()[0], g.selectedFractionByLayer()[0], 1e-7, "selected fraction");
    }
    System.out.printf("quest d=%d heads=%d/%d n=%d: page overlap %.4f, %d of %d head outputs compared%n", d, heads,
        kvHeads, total, (double) same / entries, compared, 2 * heads);
    assertTrue(same >= 0.97 * entries, "page overlap " + same + " of " + entries);
    assertTrue(compared >= heads, "only " + compared + " head outputs had the CPU's pages");
  }

  static float[] cosSin(Rope rope, int pos, boolean cos) {
    float[] c = new float[rope.headDim() / 2], s = new float[rope.headDim() / 2];
    rope.angles(pos, c, s);
    return cos ? c : s;
  }
}
