package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
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
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Locale;
import java.util.Random;
import java.util.Set;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * GpuTsa against the CPU's TokenSparseAttention, both through their policy objects, on random
 * inputs in a paged cache with a shuffled page table (AttentionParityTest's layout): the dense
 * fallbacks (short context, tau 0, a layer that is not sparse), sparse chunks of several sizes,
 * pool 1 / 3 / 4 / 7, GQA groups 1, 4, two window row groups, and exactly tied masses.
 *
 * <p>Checks on a sparse chunk: keep count equal (one apart only where the cumulative mass is within
 * rounding of tau); per head a list ascending with the window last, overlapping the CPU's >= 99 %
 * (the GPU's bf16 queries flip near-tied masses at the cut-off); the GPU output against an f32
 * attention over the GPU's OWN lists for every row (exact zeros for rows outside the head's list);
 * the GPU output against the CPU twin on the (row, head) pairs whose list entries up to the row are
 * the same on both sides (a row attends every entry of its list up to itself, so one flipped entry
 * changes all later rows of the head: those are compared through the own-list reference instead);
 * equal PolicyStats (selection time aside).
 *
 * <p>Exact ties: constant keys must be constant AFTER RoPE (rotated keys at different positions
 * differ, so constant pre-RoPE keys give distinct masses); the tied cases write one rotated key
 * into every slot, so every score of a row is equal, the masses are exactly tied on both sides,
 * and the lists must be identical (the lowest slots).
 */
@Tag("gpu")
class TsaParityTest extends GpuPoolTest {

  static final double TOL = 2e-2;

  @ParameterizedTest(name = "{0}: d={1} heads={2}/{3} before={4} n={5} tsa:{6} qScale={7} constK={8}")
  @CsvSource(delimiter = ';', value = {
      "dense short; 128; 8; 2; 0; 100; tau=0.3,min=1024,window=16,pool=7,layers=all; 1; false",
      "dense tau 0; 128; 8; 2; 500; 200; tau=0,min=32,window=64,pool=7,layers=all; 1; false",
      "dense layer; 128; 8; 2; 500; 200; tau=0.3,min=32,window=64,pool=7,layers=none; 1; false",
      "dense nothing to drop; 64; 4; 2; 600; 100; tau=1e-9,min=32,window=64,pool=1,layers=all; 0.1; false",
      "sparse; 128; 8; 2; 1000; 300; tau=0.3,min=64,window=128,pool=7,layers=all; 3; false",
      "sparse pool 1 mha; 64; 8; 8; 0; 700; tau=0.2,min=32,window=64,pool=1,layers=all; 3; false",
      "sparse gqa 4; 128; 32; 8; 3000; 512; tau=0.1,min=256,window=128,pool=7,layers=all; 4; false",
      "window > chunk; 128; 8; 2; 2000; 100; tau=0.5,min=64,window=128,pool=7,layers=all; 3; false",
      "two row groups; 128; 4; 1; 1500; 400; tau=0.3,min=64,window=200,pool=3,layers=all; 3; false",
      "even pool; 64; 8; 2; 900; 257; tau=0.25,min=100,window=128,pool=4,layers=0; 3; false",
      "min binds; 128; 8; 2; 1200; 300; tau=0.6,min=1100,window=128,pool=7,layers=all; 3; false",
      "tied masses; 128; 8; 2; 1000; 300; tau=0.3004,min=64,window=128,pool=1,layers=all; 1; true",
      "tied masses pooled; 64; 4; 1; 1500; 129; tau=0.2502,min=64,window=64,pool=7,layers=all; 1; true",
      "dense keep 1; 128; 8; 2; 1000; 300; tau=0.3,keep=1.0,min=64,window=128,pool=7,layers=all; 3; false",
      "sparse keep 0.25; 128; 32; 8; 3000; 512; tau=0,keep=0.25,min=256,window=128,pool=7,layers=all; 4; false",
      "sparse keep 0.25 d64; 64; 8; 2; 1500; 257; tau=0.005,keep=0.25,min=64,window=128,pool=7,layers=all; 3; false",
      "keep min binds; 128; 8; 2; 1200; 300; keep=0.1,min=1100,window=128,pool=7,layers=all; 3; false"})
  void matchesCpu(String name, int d, int heads, int kvHeads, int before, int n, String params, double qScale,
                  boolean constantKeys) throws Exception {
    Inputs in = Inputs.of(name, d, heads, kvHeads, before, n, params, qScale, constantKeys);
    Random r = in.r();
    ModelConfig c = in.c();
    Rope rope = in.rope();
    int total = before + n, kvDim = c.kvDim(), qDim = c.qDim();
    float[] k = in.k(), v = in.v(), q = in.q();
    PolicySpec spec = in.spec();

    // device cache with a shuffled page table, filled by the engine's append kernel
    int pages = DeviceCaches.pages(total, 3);
    int[] table = DeviceCaches.shuffledTable(r, pages);
    DeviceCaches.Layer layer = DeviceCaches.layer(gpu, table, kvHeads, d, false, null);
    DeviceBuffer kRope = layer.kRope();
    Kernels.KvView view = layer.view();
    DeviceBuffer invFreq = gpu.f32(rope.inverseFrequencies());
    DeviceCaches.append(gpu, view, k, v, total, kvDim, 0, 0, invFreq);
    if (constantKeys) {
      // slot 0's key (position 0: unrotated) in every slot of the rotated cache: all scores equal
      gpu.stream.synchronize();  // kv_append has written kRope
      float[] same = new float[pages * kvHeads * Kernels.PAGE_SIZE * d];
      for (int row = 0; row < pages * kvHeads * Kernels.PAGE_SIZE; row++) {
        System.arraycopy(k, (row / Kernels.PAGE_SIZE % kvHeads) * d, same, row * d, d);
      }
      kRope.upload(Gpu.toBf16(same));
    }
    DeviceBuffer qPre = gpu.f32(q);
    DeviceBuffer qDev = gpu.poisoned((long) n * qDim * 2, true);
    gpu.k.rope(qDev.ptr(), qPre.ptr(), qDim, n, heads, d, invFreq.ptr(), null, before);

    // CPU twin on the same keys: its rotated keys replaced by the GPU's bf16 ones, so only the
    // queries' bf16 rounding and summation order separate the two
    KvCache cpu = new KvCache(c, rope, total);
    cpu.append(0, k, 0, v, 0, total, 0);
    float[] gpuKeys = readRoped(kRope, table, pages, kvHeads, d, total);
    System.arraycopy(gpuKeys, 0, cpu.ropedKeys[0], 0, total * kvDim);
    AttentionPolicy cpuPolicy = ComposedPolicy.of(spec);
    float[] ref = new float[n * qDim];
    cpuPolicy.prefill(0, q, n, before, cpu, ref, new AttentionContext(c, rope, pool));

    DeviceBuffer out = gpu.poisoned((long) n * qDim * 2, true);
    try (Kernels.Workspace ws = new Kernels.Workspace(gpu.ctx);
         GpuPolicy gp = GpuPolicy.open(spec, new GpuEnv(c, gpu.ctx, gpu.k, ws, invFreq.ptr(), null))) {
      gp.prefill(new LayerCall(0, n, before, before, qPre.ptr(), qDim, qDev.ptr(), view, out.ptr()));
      float[] got = gpu.readBf16(out, n * qDim);
      PolicyStats gs = gp.stats(), cs = cpuPolicy.stats();
      GpuTsa tsa = (GpuTsa) field(gp, "prefill");

      boolean sparse = cs.sparseLayers() > 0;
      assertEquals(cs.sparseLayers(), gs.sparseLayers(), "sparse layers");
      if (!sparse) {
        assertTrue(name.startsWith("dense"), name + ": expected a sparse layer");
        assertArrayEquals(cs.selectedFractionByLayer(), gs.selectedFractionByLayer(), "selected fraction");
        Gpu.assertClose(got, ref, TOL, name + " dense fallback");
        return;
      }
      assertTrue(!name.startsWith("dense"), name + ": expected the dense fallback");
      int w = Math.min(spec.prefill().intParam("window"), n), prefix = total - w;
      Object cpuPart = field(cpuPolicy, "prefill");
      Method keepCount = cpuPart.getClass().getDeclaredMethod("keepCount", int.class);
      keepCount.setAccessible(true);
      int cpuKeep = (int) keepCount.invoke(cpuPart, prefix);
      int[] info = tsa.lastInfo();
      if (cpuKeep != info[0]) {
        // allowed only where the cumulative mass at the cut-off is tied with tau within rounding
        float[] global = Arrays.copyOf((float[]) field(cpuPart, "global"), prefix);
        assertTrue(Math.abs(cpuKeep - info[0]) == 1 && massNearTau(global, spec.prefill().doubleParam("tau"),
            prefix - Math.max(cpuKeep, info[0])), name + ": keep count CPU " + cpuKeep + " GPU " + info[0]);
      }
      int gpuLen = info[0] + w;
      int[] cpuLists = (int[]) field(cpuPart, "lists");
      int[] gpuLists = tsa.downloadLists(gpuLen);

      float[] rq = gpu.readBf16(qDev, n * qDim);
      boolean identical = compareSparse(name, got, ref, cpuLists, cpuKeep, gpuLists, info[0], rq, cpu.ropedKeys[0], v,
          n, before, heads, kvHeads, d, w, prefix);
      if (identical) {
        assertArrayEquals(cs.selectedFractionByLayer(), gs.selectedFractionByLayer(), "selected fraction");
      } else {
        assertEquals(cs.selectedFractionByLayer()[0], gs.selectedFractionByLayer()[0], 0.01, "selected fraction");
      }
      assertEquals(cs.kvBytesAfter(), gs.kvBytesAfter());
      assertEquals(Double.isNaN(cs.attendedTokensMean()), Double.isNaN(gs.attendedTokensMean()));
    }
  }

  /**
   * One case's model and inputs (TsaRoundingModelTest models the GPU on the same ones): r seeded
   * from the case, keys, values (constantKeys: every slot slot 0's keys) and queries (n, qDim)
   * scaled by qScale drawn from it in that order; r goes on to draw the page table.
   */
  record Inputs(Random r, ModelConfig c, Rope rope, float[] k, float[] v, float[] q, PolicySpec spec) {
    static Inputs of(String name, int d, int heads, int kvHeads, int before, int n, String params, double qScale,
                     boolean constantKeys) {
      Random r = new Random(name.hashCode() * 31L + d + n);
      ModelConfig c = DeviceCaches.config(1, heads, kvHeads, d, 0);
      int total = before + n, kvDim = c.kvDim();
      float[] k = Gpu.random(r, total * kvDim, 1), v = Gpu.random(r, total * kvDim, 1);
      if (constantKeys) for (int i = 1; i < total; i++) System.arraycopy(k, 0, k, i * kvDim, kvDim);
      float[] q = Gpu.random(r, n * c.qDim(), qScale);
      return new Inputs(r, c, new Rope(c), k, v, q, PolicySpec.parse("tsa:" + params));
    }
  }

  /**
   * The sparse-chunk checks of the class comment on host arrays: got and ref (n, heads, d), the
   * lists (heads, keep + w) of each side, rq (n, heads, d) the GPU's rotated queries, keys and v
   * (slots, kvHeads * d). Returns whether the lists are identical. Also run on a CPU model of the
   * GPU (TsaHostLogicTest) so the rule is known to pass on rounding-sized query changes.
   */
  static boolean compareSparse(String name, float[] got, float[] ref, int[] cpuLists, int cpuKeep, int[] gpuLists,
                               int gpuKeep, float[] rq, float[] keys, float[] v, int n, int before, int heads,
                               int kvHeads, int d, int w, int prefix) {
    int len = cpuKeep + w, gpuLen = gpuKeep + w, qDim = heads * d;
    // per-head lists: shape, overlap, and the rows whose list up to themselves is the same on both sides
    float[] own = new float[n * qDim];
    float[] gotCmp = got.clone(), refCmp = ref.clone();
    boolean identical = cpuKeep == gpuKeep;
    int compared = 0, attended = 0;
    for (int h = 0; h < heads; h++) {
      int[] a = Arrays.copyOfRange(cpuLists, h * len, (h + 1) * len);
      int[] g = Arrays.copyOfRange(gpuLists, h * gpuLen, (h + 1) * gpuLen);
      for (int e = 1; e < gpuLen; e++) assertTrue(g[e - 1] < g[e], "head " + h + " list not ascending at " + e);
      for (int e = 0; e < w; e++) assertEquals(prefix + e, g[gpuLen - w + e], "window slots last");
      Set<Integer> both = new HashSet<>(), inGpu = new HashSet<>();
      for (int x : g) inGpu.add(x);
      for (int x : a) if (inGpu.contains(x)) both.add(x);
      double overlap = (double) both.size() / Math.max(len, gpuLen);
      identical &= Arrays.equals(a, g);
      assertTrue(overlap >= 0.99, String.format(Locale.ROOT, "%s head %d: overlap %.4f", name, h, overlap));
      for (int i = 0; i < n; i++) {
        int slot = before + i, ca = upTo(a, slot), cg = upTo(g, slot);
        boolean inA = ca > 0 && a[ca - 1] == slot, inG = cg > 0 && g[cg - 1] == slot;
        if (!inG) {
          for (int x = 0; x < d; x++) assertEquals(0f, got[(i * heads + h) * d + x], "row outside the list must be 0");
        }
        boolean same = inA == inG && (!inA || Arrays.equals(a, 0, ca, g, 0, cg));
        if (inA && inG) attended++;
        if (same && inA) compared++;
        if (!same) {
          Arrays.fill(gotCmp, (i * heads + h) * d, (i * heads + h + 1) * d, 0f);
          Arrays.fill(refCmp, (i * heads + h) * d, (i * heads + h + 1) * d, 0f);
        }
      }
    }
    IntStream.range(0, heads).parallel().forEach(h -> listAttention(own, rq, keys, v,
        Arrays.copyOfRange(gpuLists, h * gpuLen, (h + 1) * gpuLen), before, heads, kvHeads, d, h));
    Gpu.assertClose(got, own, TOL, name + " sparse output vs f32 attention over the GPU's lists");
    if (name.startsWith("tied")) assertTrue(identical, "exact ties must select the same (lowest) slots");
    // no minimum: a flipped key below the chunk changes every row of its head (window > chunk: the
    // CPU model compares 200 of 800 rows), so all heads may differ; the own-list check covers them
    assertTrue(!identical || compared == attended, name + ": identical lists, yet " + compared + " of " + attended);
    Gpu.assertClose(gotCmp, refCmp, TOL, name + " sparse output vs CPU (" + compared + " rows)");
    return identical;
  }

  /** Entries of the ascending list that are <= slot. */
  static int upTo(int[] list, int slot) {
    int lo = 0, hi = list.length;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (list[mid] <= slot) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * own (n, heads, d) for head h: each chunk row in the ascending list attends, in f32, the list
   * entries up to itself (q rotated, as the GPU's bf16 rq; keys rotated (slots, kvHeads * d);
   * v (slots, kvHeads * d)); rows outside the list stay 0.
   */
  static void listAttention(float[] own, float[] rq, float[] keys, float[] v, int[] list, int before, int heads,
                            int kvHeads, int d, int h) {
    int kvDim = kvHeads * d, ko = h / (heads / kvHeads) * d;
    double scale = 1 / Math.sqrt(d);
    double[] s = new double[list.length], acc = new double[d];
    for (int e = 0; e < list.length; e++) {
      if (list[e] < before) continue;
      int qo = ((list[e] - before) * heads + h) * d;
      double max = Double.NEGATIVE_INFINITY, sum = 0;
      for (int j = 0; j <= e; j++) {
        double dot = 0;
        for (int x = 0; x < d; x++) dot += (double) rq[qo + x] * keys[list[j] * kvDim + ko + x];
        s[j] = dot * scale;
        max = Math.max(max, s[j]);
      }
      Arrays.fill(acc, 0);
      for (int j = 0; j <= e; j++) {
        double p = Math.exp(s[j] - max);
        sum += p;
        for (int x = 0; x < d; x++) acc[x] += p * v[list[j] * kvDim + ko + x];
      }
      for (int x = 0; x < d; x++) own[qo + x] = (float) (acc[x] / sum);
    }
  }

  /**
   * Whether the sum of the m smallest normalised masses (the CPU's cut-off candidates m and m + 1)
   * lies within rounding (1e-4 relative) of tau: there the two backends may count one apart.
   */
  static boolean massNearTau(float[] global, double tau, int m) {
    double total = 0;
    for (float x : global) total += x;
    double[] s = new double[global.length];
    for (int j = 0; j < s.length; j++) s[j] = global[j] / (total + 1e-8);
    Arrays.sort(s);
    double cum = 0;
    for (int j = 0; j < Math.min(s.length, m + 2); j++) {
      cum += s[j];
      if (j + 1 >= m && Math.abs(cum - tau) <= 1e-4 * tau) return true;
    }
    return false;
  }

  /** kRope (pages, nKv, 64, d) bf16 through the page table, as (slots, nKv * d) f32. */
  static float[] readRoped(DeviceBuffer kRope, int[] table, int pages, int nKv, int d, int slots) {
    float[] all = gpu.readBf16(kRope, pages * nKv * Kernels.PAGE_SIZE * d);
    float[] out = new float[slots * nKv * d];
    for (int s = 0; s < slots; s++) {
      int page = table[s / Kernels.PAGE_SIZE];
      for (int h = 0; h < nKv; h++) {
        System.arraycopy(all, ((page * nKv + h) * Kernels.PAGE_SIZE + s % Kernels.PAGE_SIZE) * d, out, (s * nKv + h) * d, d);
      }
    }
    return out;
  }

  static Object field(Object o, String name) throws ReflectiveOperationException {
    Field f = o.getClass().getDeclaredField(name);
    f.setAccessible(true);
    return f.get(o);
  }
}
