package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.attention.AttentionContext;
import io.longsieve.attention.AttentionPolicy;
import io.longsieve.attention.DenseAttention;
import io.longsieve.attention.PolicySpec;
import io.longsieve.cpu.KvCache;
import io.longsieve.cpu.ThreadPool;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.model.RopeScaling;
import java.util.List;
import java.util.Random;
import jcuda.Pointer;
import jcuda.driver.JCudaDriver;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The GPU KV compression parts against their CPU twins through the policy API: the same random
 * prompt (two prefill chunks, so the observation window spans calls) goes through
 * PolicySpec.createCpu on a CPU KvCache and through GpuPolicy on a PagedKvCache; then the compacted
 * caches (keys both ways, values), the logit bias, the following decode steps' attention and
 * kvBytesAfter must agree. Also: a logit bias shifts the dense decode kernels as DenseAttention.
 */
@Tag("gpu")
class KvCompressionParityTest {

  static final double TOL = 2e-2;

  static Gpu gpu;
  static ThreadPool pool;

  @BeforeAll
  static void open() {
    gpu = new Gpu();
    pool = new ThreadPool(0);
  }

  @AfterAll
  static void close() {
    gpu.close();
    pool.close();
  }

  static ModelConfig config(int layers, int heads, int kvHeads, int d) {
    return new ModelConfig("llama", heads * d, 4 * d, layers, heads, kvHeads, d, 256, 1e-5, 500000,
        new RopeScaling("llama3", 8, 1, 4, 8192), 1 << 20, false, false, 0, 1, List.of(2));
  }

  @ParameterizedTest(name = "{0} ({2} search)")
  @CsvSource(delimiter = '|', value = {
      "selkv:ratio=0.25,merge=values | 1 | mma",
      "selkv:ratio=0.25,merge=values | 1 | f32",
      "selkv:ratio=0.25,merge=kv | 1 | mma",
      "selkv:ratio=0.25,merge=kv | 1 | f32",
      "selkv:ratio=0.25,merge=off | 1 | mma",
      "selkv:ratio=0.3,merge=values,pool=5 | 1 | mma",
      "selkv:ratio=0.2,merge=kv,alpha=0.5,pool=4,sinks=8,window=16 | 2 | mma",
      "snapkv:capacity=300 | 1 | -",
      "snapkv:ratio=0.25,pool=1 | 1 | -",
      "snapkv:capacity=257,pool=4,window=20 | 1 | -",
      "kv=streaming:sinks=4,recent=300 | 6 | -",
      "selkv:ratio=0.25,merge=kv | 3 | pooled",
      "snapkv:capacity=300 | 2 | pooled",
      "kv=streaming:sinks=4,recent=300 | 3 | pooled"})
  void matchesCpuTwin(String policy, int decodeSteps, String search) {
    GpuSelKv.tensorCoreSearch = !search.equals("f32");
    try {
      run(policy, decodeSteps, search.equals("pooled"));
    } finally {
      GpuSelKv.tensorCoreSearch = true;
    }
  }

  /** pooled: the cache takes its pages from a shared pool, interleaved with another sequence's. */
  private void run(String policy, int decodeSteps, boolean pooled) {
    Random r = new Random(policy.hashCode());
    ModelConfig c = config(2, 8, 2, 128);
    Rope rope = new Rope(c);
    AttentionContext actx = new AttentionContext(c, rope, pool);
    int total = 1000, first = 600, kvDim = c.kvDim(), qDim = c.qDim(), cap = total + decodeSteps + 64;
    PolicySpec spec = PolicySpec.parse(policy);
    AttentionPolicy cpu = spec.createCpu();
    KvCache cpuKv = new KvCache(c, rope, cap);
    DeviceBuffer invFreq = gpu.f32(rope.inverseFrequencies());
    int poolPages = 64;
    try (Kernels.Workspace ws = new Kernels.Workspace(gpu.ctx);
         KvPagePool shared = pooled ? new KvPagePool(gpu.ctx, c, poolPages) : null;
         PagedKvCache other = pooled ? new PagedKvCache(gpu.ctx, c, 30 * 64, shared) : null;
         PagedKvCache gKv = new PagedKvCache(gpu.ctx, c, cap, shared);
         GpuPolicy gp = GpuPolicy.open(spec, new GpuEnv(c, gpu.ctx, gpu.k, ws, invFreq.ptr(), null))) {
      if (pooled) {
        for (int p = 1; p <= 16; p++) {  // every other pool page: the page table is far from the identity
          gKv.reserve(64 * p);
          other.reserve(64 * p);
        }
      }
      // the prompt, in two chunks
      for (int s = 0; s < total; s = s == 0 ? first : total) {
        int n = s == 0 ? first : total - first;
        step(r, c, actx, cpu, cpuKv, gp, gKv, invFreq, n, s, false);
      }
      cpu.afterPrefill(cpuKv, actx);
      gp.afterPrefill(gKv);
      assertEquals(cpu.stats().kvBytesAfter(), gp.stats().kvBytesAfter(), "kvBytesAfter");
      if (pooled) {
        int longest = 0;
        for (int l = 0; l < c.numLayers(); l++) longest = Math.max(longest, gKv.length(l));
        assertEquals((longest + 63) / 64, gKv.mappedPages(), "pages kept after shrinking");
        assertEquals(poolPages - 16 - gKv.mappedPages(), shared.freePages(), "pages back in the pool");
      }
      for (int l = 0; l < c.numLayers(); l++) compareLayer(c, cpuKv, gKv, l, policy);
      // the following decode steps (the rolling cache evicts at each of them)
      for (int t = 0; t < decodeSteps; t++) {
        float[][] outs = step(r, c, actx, cpu, cpuKv, gp, gKv, invFreq, 1, total + t, true);
        Gpu.assertClose(outs[1], outs[0], TOL, policy + ": decode step " + t);
      }
      for (int l = 0; l < c.numLayers(); l++) compareLayer(c, cpuKv, gKv, l, policy + " after decoding");
    }
  }

  /** One prefill chunk or decode step of n rows at pos0 on both backends; returns {cpu, gpu} outputs of the last layer. */
  private static float[][] step(Random r, ModelConfig c, AttentionContext actx, AttentionPolicy cpu, KvCache cpuKv,
                                GpuPolicy gp, PagedKvCache gKv, DeviceBuffer invFreq, int n, int pos0, boolean decode) {
    int kvDim = c.kvDim(), qDim = c.qDim(), heads = c.numHeads(), d = c.headDim();
    float[][] result = new float[2][];
    gKv.reserve(n);
    for (int l = 0; l < c.numLayers(); l++) {
      float[] k = Gpu.random(r, n * kvDim, 1), v = Gpu.random(r, n * kvDim, 1), q = Gpu.random(r, n * qDim, 1);
      // CPU
      cpuKv.append(l, k, 0, v, 0, n, pos0);
      float[] ref = new float[n * qDim];
      if (decode) cpu.decode(l, q, pos0, cpuKv, ref, actx);
      else cpu.prefill(l, q, n, pos0, cpuKv, ref, actx);
      // GPU
      int before = gKv.length(l);
      float[] rows = new float[n * 2 * kvDim];
      for (int i = 0; i < n; i++) {
        System.arraycopy(k, i * kvDim, rows, i * 2 * kvDim, kvDim);
        System.arraycopy(v, i * kvDim, rows, i * 2 * kvDim + kvDim, kvDim);
      }
      Kernels.KvView view = gKv.layer(l);
      gpu.k.kvAppend(view, gpu.f32(rows).ptr(), 2 * kvDim, 0, kvDim, n, before, pos0, invFreq.ptr());
      gKv.advance(l, n);
      DeviceBuffer qPre = gpu.f32(q), qRot = gpu.poisoned((long) n * qDim * 2, true);
      gpu.k.rope(qRot.ptr(), qPre.ptr(), qDim, n, heads, d, invFreq.ptr(), null, pos0);
      DeviceBuffer out = gpu.poisoned((long) n * qDim * 2, true);
      LayerCall call = new LayerCall(l, n, pos0, before, qPre.ptr(), qDim, qRot.ptr(), view, out.ptr());
      if (decode) gp.decode(call, gKv);
      else gp.prefill(call);
      result[0] = ref;
      result[1] = gpu.readBf16(out, n * qDim);
    }
    return result;
  }

  /** Lengths, keys (before and after RoPE), values and bias of one layer, row by row. */
  private static void compareLayer(ModelConfig c, KvCache cpuKv, PagedKvCache gKv, int l, String what) {
    int n = cpuKv.length(l), nKv = c.numKvHeads(), d = c.headDim(), kvDim = c.kvDim();
    assertEquals(n, gKv.length(l), what + ": layer " + l + " length");
    float[][] g = PagedKvCacheReader.read(gpu, gKv, l, n);
    float[][] ref = {cpuKv.keys[l], cpuKv.ropedKeys[l], cpuKv.values[l]};
    String[] names = {"kPre", "kRope", "v"};
    // a row matches when all three of its tensors do: the keep set (ties may pick another slot)
    int matched = 0;
    double[] num = new double[3], den = new double[3];
    for (int s = 0; s < n; s++) {
      for (int h = 0; h < nKv; h++) {
        int o = s * kvDim + h * d;
        boolean ok = true;
        double[] rn = new double[3], rd = new double[3];
        for (int w = 0; w < 3; w++) {
          for (int e = 0; e < d; e++) {
            float a = g[w][o + e], b = ref[w][o + e];
            assertTrue(Float.isFinite(a), what + ": " + names[w] + " not finite at slot " + s);
            rn[w] += (double) (a - b) * (a - b);
            rd[w] += (double) b * b;
          }
          ok &= Math.sqrt(rn[w] / Math.max(rd[w], 1e-30)) <= 3 * TOL;
        }
        if (ok) {
          matched++;
          for (int w = 0; w < 3; w++) {
            num[w] += rn[w];
            den[w] += rd[w];
          }
        }
      }
    }
    double overlap = matched / (double) Math.max(1, n * nKv);
    assertTrue(overlap >= 0.99, what + ": layer " + l + " keeps the same slots for only " + overlap + " of rows");
    for (int w = 0; w < 3; w++) {
      double e = Math.sqrt(num[w] / Math.max(den[w], 1e-30));
      assertTrue(e <= TOL, what + ": layer " + l + " " + names[w] + " relative error " + e);
    }
    float[] cpuBias = cpuKv.logitBias[l];
    assertEquals(cpuBias != null, gKv.hasBias(), what + ": bias present");
    if (cpuBias != null) {
      float[] gb = new float[n * nKv];
      gpu.stream.synchronize();
      JCudaDriver.cuMemcpyDtoH(Pointer.to(gb), gKv.layer(l).bias(), n * nKv * 4L);
      int close = 0;
      for (int i = 0; i < n * nKv; i++) if (Math.abs(gb[i] - cpuBias[i]) <= 1e-3) close++;
      assertTrue(close >= 0.99 * n * nKv, what + ": layer " + l + " bias equal for only " + close + " of " + n * nKv);
    }
  }

  /**
   * The nearest-kept-key search, both kernels, against a CPU argmax of cosines (SelKv.merge's):
   * identical picks except near-ties, whose cosines then agree to 1e-4.
   */
  @ParameterizedTest
  @CsvSource({"128, 4000, 0.25", "64, 3000, 0.3", "128, 20000, 0.25"})
  void nearestKeySearchMatchesCpu(int d, int n, double ratio) {
    Random r = new Random(n + d);
    ModelConfig c = config(1, 4 * 2, 2, d);
    int nKv = 2, kvDim = c.kvDim();
    KvCompressKernels kk = new KvCompressKernels(gpu.k);
    try (PagedKvCache kv = new PagedKvCache(gpu.ctx, c, n)) {
      Kernels.KvView view = kv.layer(0);
      gpu.k.fillRandomBf16(view.kPre(), (long) kv.poolPages() * nKv * kv.pageSize * d, 99, 1f);
      kv.advance(0, n);
      float[] keys = PagedKvCacheReader.read(gpu, kv, 0, n)[0];
      int nKeep = (int) Math.round(ratio * n), nDrop = n - nKeep;
      int[] keep = new int[nKv * nKeep], drop = new int[nKv * nDrop];
      for (int g = 0; g < nKv; g++) {
        boolean[] kept = new boolean[n];
        for (int picked = 0; picked < nKeep; ) {
          int j = r.nextInt(n);
          if (!kept[j]) {
            kept[j] = true;
            picked++;
          }
        }
        for (int j = 0, a = 0, b = 0; j < n; j++) {
          if (kept[j]) keep[g * nKeep + a++] = j;
          else drop[g * nDrop + b++] = j;
        }
      }
      DeviceBuffer keepD = gpu.ints(keep), dropD = gpu.ints(drop), inv = gpu.alloc((long) nKv * n * 4);
      DeviceBuffer best = gpu.alloc((long) nKv * nDrop * 4), cos = gpu.alloc((long) nKv * nDrop * 4);
      DeviceBuffer best2 = gpu.alloc((long) nKv * nDrop * 4), cos2 = gpu.alloc((long) nKv * nDrop * 4);
      DeviceBuffer kHi = gpu.alloc((long) nKv * nKeep * d * 2), kLo = gpu.alloc((long) nKv * nKeep * d * 2);
      DeviceBuffer dHi = gpu.alloc((long) nKv * nDrop * d * 2), dLo = gpu.alloc((long) nKv * nDrop * d * 2);
      kk.invNorm(inv.ptr(), view, n);
      kk.nearest(best.ptr(), cos.ptr(), keepD.ptr(), nKeep, dropD.ptr(), nDrop, inv.ptr(), view, n);
      kk.unitSplit(kHi.ptr(), kLo.ptr(), keepD.ptr(), nKeep, inv.ptr(), view, n);
      kk.unitSplit(dHi.ptr(), dLo.ptr(), dropD.ptr(), nDrop, inv.ptr(), view, n);
      kk.nearestMma(best2.ptr(), cos2.ptr(), dHi.ptr(), dLo.ptr(), nDrop, kHi.ptr(), kLo.ptr(), nKeep, nKv, d);
      gpu.stream.synchronize();
      int[][] got = {best.downloadInts(nKv * nDrop), best2.downloadInts(nKv * nDrop)};
      float[][] gotCos = {cos.downloadFloats(nKv * nDrop), cos2.downloadFloats(nKv * nDrop)};
      // CPU: unit keys as SelKv.unit, first maximum
      float[] unit = new float[n * kvDim];
      for (int j = 0; j < n; j++) {
        for (int g = 0; g < nKv; g++) {
          double ss = 0;
          for (int e = 0; e < d; e++) ss += (double) keys[j * kvDim + g * d + e] * keys[j * kvDim + g * d + e];
          float iv = ss > 0 ? (float) (1 / Math.sqrt(ss)) : 0f;
          for (int e = 0; e < d; e++) unit[j * kvDim + g * d + e] = keys[j * kvDim + g * d + e] * iv;
        }
      }
      int[] same = new int[2];
      for (int g = 0; g < nKv; g++) {
        for (int i = 0; i < nDrop; i++) {
          int di = drop[g * nDrop + i], bt = 0;
          float bc = Float.NEGATIVE_INFINITY;
          float[] cosOf = new float[nKeep];
          for (int t = 0; t < nKeep; t++) {
            float cs = 0;
            for (int e = 0; e < d; e++) cs += unit[di * kvDim + g * d + e] * unit[keep[g * nKeep + t] * kvDim + g * d + e];
            cosOf[t] = cs;
            if (cs > bc) {
              bc = cs;
              bt = t;
            }
          }
          for (int w = 0; w < 2; w++) {
            int at = g * nDrop + i;
            if (got[w][at] == bt) same[w]++;
            else assertTrue(Math.abs(cosOf[got[w][at]] - bc) <= 1e-4, (w == 0 ? "f32" : "mma") + " search picked "
                + got[w][at] + " (cos " + cosOf[got[w][at]] + ") over " + bt + " (cos " + bc + ")");
            assertTrue(Math.abs(gotCos[w][at] - bc) <= 1e-4, "cosine " + gotCos[w][at] + " vs " + bc);
          }
        }
      }
      assertTrue(same[0] >= 0.999 * nKv * nDrop, "f32 search agrees on " + same[0] + " of " + nKv * nDrop);
      assertTrue(same[1] >= 0.99 * nKv * nDrop, "mma search agrees on " + same[1] + " of " + nKv * nDrop);
    }
  }

  /** A per-slot logit bias shifts flash decoding and the split kernel exactly as DenseAttention. */
  @ParameterizedTest
  @ValueSource(strings = {"fdecode", "split"})
  void biasShiftsDenseDecode(String path) {
    Random r = new Random(path.hashCode());
    ModelConfig c = config(1, 8, 2, 128);
    Rope rope = new Rope(c);
    int total = 3000, kvDim = c.kvDim(), qDim = c.qDim(), nKv = c.numKvHeads(), d = c.headDim();
    float[] k = Gpu.random(r, total * kvDim, 1), v = Gpu.random(r, total * kvDim, 1), q = Gpu.random(r, qDim, 1);
    KvCache cpu = new KvCache(c, rope, total);
    cpu.append(0, k, 0, v, 0, total, 0);
    float[] bias = cpu.logitBias(0);
    for (int i = 0; i < total * nKv; i++) bias[i] = (float) (r.nextGaussian() * 2);
    float[] ref = new float[qDim];
    new DenseAttention().decode(0, q, total - 1, cpu, ref, new AttentionContext(c, rope, pool));

    DeviceBuffer invFreq = gpu.f32(rope.inverseFrequencies());
    try (Kernels.Workspace ws = new Kernels.Workspace(gpu.ctx); PagedKvCache kv = new PagedKvCache(gpu.ctx, c, total)) {
      float[] rows = new float[total * 2 * kvDim];
      for (int i = 0; i < total; i++) {
        System.arraycopy(k, i * kvDim, rows, i * 2 * kvDim, kvDim);
        System.arraycopy(v, i * kvDim, rows, i * 2 * kvDim + kvDim, kvDim);
      }
      kv.ensureBias();
      Kernels.KvView view = kv.layer(0);
      gpu.k.kvAppend(view, gpu.f32(rows).ptr(), 2 * kvDim, 0, kvDim, total, 0, 0, invFreq.ptr());
      kv.advance(0, total);
      gpu.stream.synchronize();
      JCudaDriver.cuMemcpyHtoD(view.bias(), Pointer.to(bias), total * nKv * 4L);
      DeviceBuffer qRot = gpu.poisoned(qDim * 2L, true), out = gpu.poisoned(qDim * 2L, true);
      gpu.k.rope(qRot.ptr(), gpu.f32(q).ptr(), qDim, 1, c.numHeads(), d, invFreq.ptr(), null, total - 1);
      float scale = (float) (1.0 / Math.sqrt(d));
      if (path.equals("fdecode")) gpu.k.flashDecode(out.ptr(), qRot.ptr(), view, 1, c.numHeads(), total - 1, 0, scale, ws);
      else gpu.k.splitAttention(out.ptr(), qRot.ptr(), view, 1, c.numHeads(), total - 1, 0, scale, ws);
      float[] got = gpu.readBf16(out, qDim);
      Gpu.assertClose(got, ref, TOL, path + " with bias");
      // and the bias matters: without it the output is far off
      float[] plain = new float[qDim];
      cpu.logitBias[0] = null;
      new DenseAttention().decode(0, q, total - 1, cpu, plain, new AttentionContext(c, rope, pool));
      assertTrue(Gpu.relErr(got, plain) > 5 * TOL, "the bias changes the output");
    }
  }
}
