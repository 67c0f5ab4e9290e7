package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.policy.AttentionContext;
import io.longsieve.cpu.policy.AttentionPolicy;
import io.longsieve.cpu.policy.ComposedPolicy;
import io.longsieve.cpu.policy.DenseAttention;
import io.longsieve.cpu.policy.TokenSelectProbe;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.GpuPoolTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.DeviceCaches;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import io.longsieve.policy.SelectionStats;
import java.util.HashSet;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * GpuTokenSelect against the CPU TokenSelect on random q/k/v: the same cache contents on both sides
 * (the device's behind a shuffled page table), a prefill call of several sub-chunks, then decode
 * steps whose queries drift slowly (so the Selection Cache both hits and misses). Outputs agree to
 * bf16 tolerance; selected sets are identical except where the CPU's votes are tied within
 * rounding, with overlap >= 99% overall; cache hits and statistics equal the CPU's. The score=rope
 * variants score the rotated keys against the queries at their real positions (prefill sub-chunks of
 * several rows and decode rows, compact and original positions, heads=layer and heads=kvhead).
 */
@Tag("gpu")
class TokenSelectParityTest extends GpuPoolTest {

  static final double TOL = 2e-2;
  static final String BASE = "sinks=16,k=192,window=48,chunk=96";

  /** Both caches, the model shape and the environment of one test. */
  static final class Setup implements AutoCloseable {
    final ModelConfig c;
    final Rope rope;
    final AttentionContext actx;
    final KvCache cpu;
    final PagedKvCache dev;
    final Kernels.Workspace ws;
    final DeviceBuffer invFreq;
    final GpuEnv env;
    final Random r;
    final int[] table;
    /**
     * Round the CPU's rotated keys to bf16 as the device stores kRope (kv_append rounds after the
     * rotation): score=rope reads them, and the f32 keys' logits would differ by bf16 rounding
     * (~2^-9 relative), more than the near-tie allowance of the selected-set check.
     */
    boolean bf16RopedKeys;

    Setup(int layers, int heads, int kvHeads, int d, int capacity, long seed) {
      c = DeviceCaches.config(layers, heads, kvHeads, d, 0);
      rope = new Rope(c);
      actx = new AttentionContext(c, rope, pool);
      cpu = new KvCache(c, rope, capacity);
      dev = new PagedKvCache(gpu.ctx, c, capacity);
      r = new Random(seed);
      table = DeviceCaches.shuffledTable(r, dev.pages);
      ws = new Kernels.Workspace(gpu.ctx);
      invFreq = gpu.f32(rope.inverseFrequencies());
      env = new GpuEnv(c, gpu.ctx, gpu.k, ws, invFreq.ptr(), null);
    }

    /** The device view of a layer with the shuffled page table. */
    Kernels.KvView view(int layer, DeviceBuffer pageTable) {
      Kernels.KvView v = dev.layer(layer);
      return new Kernels.KvView(v.kPre(), v.kRope(), v.v(), pageTable.ptr(), v.nKv(), v.headDim(), v.pageSize(), v.bias());
    }

    /** Appends n random tokens at positions pos0.. to every layer of both caches. */
    void append(int n, int pos0, DeviceBuffer pageTable) {
      int kvDim = c.kvDim();
      for (int l = 0; l < c.numLayers(); l++) {
        float[] k = Gpu.random(r, n * kvDim, 1), v = Gpu.random(r, n * kvDim, 1);
        cpu.append(l, k, 0, v, 0, n, pos0);
        if (bf16RopedKeys) {
          float[] rk = cpu.ropedKeys[l];
          for (int i = (cpu.length(l) - n) * kvDim, e = cpu.length(l) * kvDim; i < e; i++) rk[i] = Gpu.roundBf16(rk[i]);
        }
        DeviceCaches.append(gpu, view(l, pageTable), k, v, n, kvDim, dev.length(l), pos0, invFreq);
        dev.advance(l, n);
      }
    }

    @Override
    public void close() {
      gpu.stream.synchronize();
      ws.close();
      dev.close();
    }
  }

  /** Runs one policy on both backends through a prefill and decode steps, comparing as it goes. */
  static void compare(String params, int heads, int kvHeads, int d) {
    String p = BASE + (params.isEmpty() ? "" : "," + params);
    int before = 900, n = 250, steps = 12, layers = 2;
    try (Setup s = new Setup(layers, heads, kvHeads, d, before + n + steps + 8, params.hashCode() * 31L + d)) {
      s.bf16RopedKeys = p.contains("score=rope");
      DeviceBuffer pageTable = gpu.ints(s.table);
      int qDim = s.c.qDim();
      TokenSelectProbe cpuTs = new TokenSelectProbe(p, s.actx);
      // the public API runs the same CPU policy: its outputs and stats must be the probe's
      AttentionPolicy api = ComposedPolicy.of(PolicySpec.parse("tokenselect:" + p));
      SelectionStats gpuStats = new SelectionStats(layers);
      Overlap ov = new Overlap();
      try (GpuTokenSelect gpuTs = new GpuTokenSelect(PolicySpec.parse("prefill=tokenselect:" + p).prefill(), gpuStats,
          s.env)) {
        s.append(before, 0, pageTable);
        s.append(n, before, pageTable);
        float[] q = Gpu.random(s.r, n * qDim, 0.5); // logits of a few units: votes spread, few exact ties
        for (int l = 0; l < layers; l++) {
          float[] ref = new float[n * qDim];
          long hits = cpuTs.stats().cacheHits;
          cpuTs.prefill(l, q, n, before, s.cpu, ref);
          float[] viaApi = new float[n * qDim];
          api.prefill(l, q, n, before, s.cpu, viaApi, s.actx);
          assertArrayEquals(ref, viaApi, 1e-6f, p + " CPU policy API prefill");
          float[] got = runGpu(s, gpuTs, l, q, n, before, before, pageTable, true);
          Gpu.assertClose(got, ref, TOL, p + " prefill layer " + l);
          ov.add(cpuTs, gpuTs, cpuTs.stats().cacheHits > hits, p + " prefill layer " + l);
        }
        // decode: a fixed direction plus noise, so consecutive fingerprints are close (cache hits) until
        // the noise is large (misses)
        float[] base = Gpu.random(s.r, qDim, 0.5);
        for (int t = 0; t < steps; t++) {
          int pos = before + n + t;
          s.append(1, pos, pageTable);
          float noise = t < steps / 2 ? 0.02f : 1f;
          float[] qd = new float[qDim];
          for (int i = 0; i < qDim; i++) qd[i] = Gpu.roundBf16(base[i] + noise * (float) s.r.nextGaussian());
          for (int l = 0; l < layers; l++) {
            float[] ref = new float[qDim];
            long hits = cpuTs.stats().cacheHits;
            cpuTs.decode(l, qd, pos, s.cpu, ref);
            float[] viaApi = new float[qDim];
            api.decode(l, qd, pos, s.cpu, viaApi, s.actx);
            assertArrayEquals(ref, viaApi, 1e-6f, p + " CPU policy API decode");
            float[] got = runGpu(s, gpuTs, l, qd, 1, pos, pos, pageTable, false);
            Gpu.assertClose(got, ref, TOL, p + " decode step " + t + " layer " + l);
            ov.add(cpuTs, gpuTs, cpuTs.stats().cacheHits > hits, p + " decode step " + t + " layer " + l);
          }
        }
        gpuTs.collect();
      }
      ov.check(p);
      PolicyStats a = cpuTs.stats().snapshot(), b = gpuStats.snapshot();
      assertEquals(a.attendedTokensMean(), b.attendedTokensMean(), 1e-9, p + " attended mean");
      assertArrayEquals(a.selectedFractionByLayer(), b.selectedFractionByLayer(), 1e-6f, p + " selected fraction");
      assertEquals(cpuTs.stats().cacheLookups, gpuStats.cacheLookups, p + " cache lookups");
      assertEquals(cpuTs.stats().cacheHits, gpuStats.cacheHits, p + " cache hits");
      PolicyStats viaApi = api.stats();
      assertEquals(viaApi.selectionCacheHitRate(), b.selectionCacheHitRate(), 1e-12, p + " hit rate via the API");
      assertArrayEquals(viaApi.selectedFractionByLayer(), b.selectedFractionByLayer(), 1e-6f, p + " fraction via the API");
      boolean cacheOn = PolicySpec.parse("tokenselect:" + p).decode().text("cache").equals("on");  // default: off
      if (!cacheOn) assertEquals(0, gpuStats.cacheHits);
      else assertTrue(gpuStats.cacheHits > 0 && gpuStats.cacheHits < gpuStats.cacheLookups, p + " hits " + gpuStats.cacheHits);
    }
  }

  /**
   * Runs the GPU part on n rows (pre-RoPE q) at positions pos0.., keys already at slots before..;
   * returns the output as floats.
   */
  static float[] runGpu(Setup s, GpuTokenSelect ts, int layer, float[] q, int n, int pos0, int before,
                        DeviceBuffer pageTable, boolean prefill) {
    int qDim = s.c.qDim(), heads = s.c.numHeads(), d = s.c.headDim();
    DeviceBuffer qPre = gpu.f32(q);
    DeviceBuffer qRot = gpu.poisoned((long) n * qDim * 2, true);
    gpu.k.rope(qRot.ptr(), qPre.ptr(), qDim, n, heads, d, s.invFreq.ptr(), null, pos0);
    DeviceBuffer out = gpu.poisoned((long) n * qDim * 2, true);
    LayerCall c = new LayerCall(layer, n, pos0, before, qPre.ptr(), qDim, qRot.ptr(), s.view(layer, pageTable), out.ptr());
    if (prefill) ts.prefill(c);
    else ts.decode(c);
    return gpu.readBf16(out, n * qDim);
  }

  /** Selected-set agreement: per call, slots in one list and not the other must be near-ties. */
  static final class Overlap {
    long same, total;

    /** hit: the CPU reused its cached top-k (its last votes are another layer's: count, don't judge). */
    void add(TokenSelectProbe cpu, GpuTokenSelect dev, boolean hit, String what) {
      int len = cpu.listLen();
      assertEquals(len, dev.lastListLen(), what + ": list length");
      int[] a = cpu.lists(), b = dev.downloadLists();
      assertEquals(a.length, b.length, what + ": lists");
      int lists = a.length / len;
      for (int g = 0; g < lists; g++) {
        Set<Integer> sa = new HashSet<>(), sb = new HashSet<>();
        for (int i = 0; i < len; i++) {
          sa.add(a[g * len + i]);
          sb.add(b[g * len + i]);
        }
        for (int i = 1; i < len; i++) assertTrue(b[g * len + i] > b[g * len + i - 1] || i == 0, what + ": ascending");
        float kth = Float.POSITIVE_INFINITY; // smallest value the CPU selected
        for (int x : sa) {
          float v = cpu.selectionValue(g, x, lists);
          if (!Float.isNaN(v)) kth = Math.min(kth, v);
        }
        for (int x : sa) {
          total++;
          if (sb.contains(x)) {
            same++;
          } else if (!hit) {
            float v = cpu.selectionValue(g, x, lists);
            assertTrue(Math.abs(v - kth) <= 1e-3 * Math.abs(kth) + 1e-12,
                what + ": slot " + x + " (value " + v + ", k-th " + kth + ") missing on the GPU and not a near-tie");
          }
        }
      }
    }

    void check(String what) {
      double o = (double) same / total;
      System.out.printf("%s: selected-set overlap %.4f (%d of %d)%n", what, o, same, total);
      assertTrue(o >= 0.99, what + ": overlap " + o);
    }
  }

  @ParameterizedTest(name = "tokenselect:{0}")  // "" is the defaults: the name must not be blank
  @ValueSource(strings = {"", "positions=original", "heads=kvhead,cache=on", "gqa=mod", "pool=3", "pool=4", "cache=on",
      "index=int4,cache=on", "heads=kvhead,gqa=mod,positions=original,index=int4,scale=sqrt", "k_frac=0.15,cache=off",
      "pool=3,heads=kvhead,cache=off,index=int4", "score=rope,cache=on", "score=rope,positions=original",
      "score=rope,heads=kvhead", "score=rope,heads=kvhead,gqa=mod,positions=original,scale=sqrt,cache=on",
      "score=rope,k_frac=0.15,pool=3,cache=off"})
  void matchesCpuTokenSelect(String params) {
    compare(params, 8, 2, 64);
  }

  @Test
  void matchesCpuOnLlamaHeadShape() {
    compare("", 32, 8, 128);
    compare("gqa=mod,index=int4,cache=on", 32, 8, 128);
    compare("heads=kvhead,score=rope", 32, 8, 128);
  }

  @Test
  void fullBudgetIsDenseAttention() {
    try (Setup s = new Setup(1, 8, 2, 64, 700, 5)) {
      DeviceBuffer pageTable = gpu.ints(s.table);
      int n = 100, before = 500, qDim = s.c.qDim();
      s.append(before + n, 0, pageTable);
      float[] q = Gpu.random(s.r, n * qDim, 1);
      float[] dense = new float[n * qDim];
      new DenseAttention().prefill(0, q, n, before, s.cpu, dense, s.actx);
      SelectionStats st = new SelectionStats(1);
      try (GpuTokenSelect ts = new GpuTokenSelect(PolicySpec.parse("prefill=tokenselect:k=4096,chunk=64").prefill(), st,
          s.env)) {
        Gpu.assertClose(runGpu(s, ts, 0, q, n, before, before, pageTable, true), dense, TOL, "full budget prefill");
        float[] qd = Gpu.random(s.r, qDim, 1), dd = new float[qDim];
        s.append(1, before + n, pageTable);
        new DenseAttention().decode(0, qd, before + n, s.cpu, dd, s.actx);
        Gpu.assertClose(runGpu(s, ts, 0, qd, 1, before + n, before + n, pageTable, false), dd, TOL,
            "full budget decode");
      }
      assertEquals(1.0, st.snapshot().selectedFractionByLayer()[0], 1e-6);
    }
  }
}
