package io.longsieve.bench;

import io.longsieve.cuda.CudaModel;
import io.longsieve.cuda.CudaWeights;
import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.driver.Launcher;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.policy.GpuPolicy;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import jcuda.driver.JCudaDriver;

/**
 * The sparse-attention benchmarks of {@code longsieve bench --sparse} (issue 5 §3): each kernel
 * family's own section (list attention, TokenSelect, TSA, KV compression, Quest), then whole decode
 * steps of the synthetic Llama-3.1-8B at a long context with dense attention and with each decode
 * policy, on one prefilled cache, so the end-to-end ratio is measured in one run. Random weights fix
 * the kernels' speed, not the sparsity a trained model would realise (Selection Cache hits need
 * similar consecutive queries, which random weights rarely give).
 */
public final class SparseBench {
  private SparseBench() {}

  /** Decode policies timed end to end against dense; the prefill is dense and shared. */
  static final String[] DECODE_POLICIES = {"dense", "decode=tokenselect", "decode=tokenselect:index=int4",
      "decode=quest", "decode=streaming"};

  public static void run(Bench b, ModelConfig c, int[] contexts, int chunk, int decodeSteps, boolean endToEnd) {
    b.section("launch cost", () -> launchCost(b));
    b.section("list attention", () -> ListAttentionBench.run(b, c, contexts));
    b.section("TokenSelect", () -> TokenSelectBench.run(b, c, contexts));
    b.section("Quest and StreamingLLM", () -> BaselinesBench.run(b, c, contexts));
    b.section("Token Sparse Attention", () -> TsaBench.run(b, c, contexts));
    b.section("KV compression", () -> KvCompressionBench.run(b, c, contexts));
    if (endToEnd) b.section("end to end", () -> endToEnd(b, c, Arrays.stream(contexts).max().orElse(32768), chunk, decodeSteps));
  }

  /**
   * Host time per kernel launch, arguments packed in one buffer vs JCuda's pointer-per-argument
   * list: tiny kernels launched back to back, so the GPU waits on the host and the host's cost is
   * what is timed (the same kernels, a 3-argument and a 9-argument one); and the GPU's floor per kernel.
   */
  static void launchCost(Bench b) {
    Kernels k = b.kernels();
    boolean before = Launcher.packed;
    try (DeviceBuffer f = b.ctx().alloc(64, "launch-cost scratch")) {
      for (boolean packed : new boolean[] {false, true}) {
        Launcher.packed = packed;
        for (int args : new int[] {3, 9}) {
          Runnable launch = args == 3 ? () -> k.fillF32(f.ptr(), 1, 0f)
              : () -> k.rope(f.ptr(), f.at(16), 2, 1, 1, 2, f.at(32), null, 0);
          for (int i = 0; i < 3000; i++) launch.run();  // JIT and first launches
          b.stream().synchronize();
          int n = 20000;
          long t0 = System.nanoTime();
          for (int i = 0; i < n; i++) launch.run();
          double hostUs = (System.nanoTime() - t0) / 1e3 / n;
          b.stream().synchronize();
          double wallUs = (System.nanoTime() - t0) / 1e3 / n;
          b.add(new Bench.Row("launch", (packed ? "packed argument buffer" : "JCuda argument list") + ", " + args
              + " arguments", String.format(Locale.ROOT, "host %.2f us, wall %.2f us per launch", hostUs, wallUs),
              hostUs / 1000, Double.NaN, Double.NaN, Double.NaN, Double.NaN));
        }
      }
      // the GPU's own floor per kernel: a one-element kernel back to back in a CUDA graph (no host launch
      // path), the least any kernel of a step costs however little it does
      double floorMs = b.graphMs(() -> k.fillF32(f.ptr(), 1, 0f), 20, 15);
      b.add(new Bench.Row("launch", "GPU floor per kernel: a one-element kernel in a CUDA graph",
          String.format(Locale.ROOT, "%.2f us per kernel", floorMs * 1000), floorMs, Double.NaN, Double.NaN,
          Double.NaN, Double.NaN));
    } finally {
      Launcher.packed = before;
    }
  }

  /** One dense prefill of L random tokens, then decodeSteps greedy steps per decode policy, each from position L. */
  static void endToEnd(Bench b, ModelConfig c, int L, int chunk, int decodeSteps) {
    CudaContext ctx = b.ctx();
    Kernels k = b.kernels();
    try (CudaWeights w = CudaWeights.synthetic(ctx, k, c, 11); CudaModel m = new CudaModel(c, ctx, k, w, chunk);
         PagedKvCache kv = new PagedKvCache(ctx, c, L + decodeSteps + 1)) {
      m.reserveDecode(kv.capacity);
      Random r = new Random(3);
      int[] ids = new int[L];
      for (int i = 0; i < L; i++) ids[i] = r.nextInt(c.vocabSize());
      long t0 = System.nanoTime();
      m.prefill(ids, 0, kv, null);
      m.sampleGreedy();
      m.readToken();
      b.log().printf(Locale.ROOT, "end-to-end: prefilled %d tokens in %.1f s%n", L, (System.nanoTime() - t0) / 1e9);
      double denseMs = Double.NaN;
      for (String policy : DECODE_POLICIES) {
        Step st = decodeMs(b, m, kv, policy, L, decodeSteps);
        if (st == null) continue;
        if (policy.equals("dense")) denseMs = st.ms;
        b.add(new Bench.Row("end-to-end", "decode ms/token L=" + L + " " + policy,
            String.format(Locale.ROOT, "%.1f tok/s; %.2fx dense", 1000 / st.ms, denseMs / st.ms), st.ms, Double.NaN,
            Double.NaN, denseMs / st.ms, Double.NaN));
        // when the host's enqueue time nears the step's, the launches (not the GPU) bound the step
        b.add(new Bench.Row("end-to-end", "host enqueue ms/step L=" + L + " " + policy,
            String.format(Locale.ROOT, "%d launches/step, %.1f us each", st.launches, st.hostMs * 1000 / st.launches),
            st.hostMs, Double.NaN, Double.NaN, st.hostMs / st.ms, Double.NaN));
      }
      // where a TokenSelect step's host time goes (the JRE has no profiler of its own)
      try (HostSampler hs = new HostSampler(Thread.currentThread(), 200)) {
        decodeMs(b, m, kv, "decode=tokenselect", L, decodeSteps * 2);
        hs.close();
        hs.print(b.log(), "decode=tokenselect steps at L=" + L, 25);
      }
      boolean before = Launcher.packed;
      try {  // what the host's launch cost does to a step: the same steps with JCuda's argument lists
        Launcher.packed = false;
        for (String policy : new String[] {"dense", "decode=tokenselect"}) {
          Step st = decodeMs(b, m, kv, policy, L, decodeSteps);
          if (st == null) continue;
          b.add(new Bench.Row("end-to-end", "decode ms/token L=" + L + " " + policy + " (JCuda argument lists)",
              String.format(Locale.ROOT, "%.1f tok/s; host enqueue %.2f ms", 1000 / st.ms, st.hostMs), st.ms,
              Double.NaN, Double.NaN, denseMs / st.ms, Double.NaN));
        }
      } finally {
        Launcher.packed = before;
      }
    }
  }

  /** Medians of a decode step: wall ms, the host's enqueue ms (until the step's last launch returns), launches. */
  record Step(double ms, double hostMs, long launches) {}

  /** A decode step's medians under a policy, null (logged) when the policy fails. */
  private static Step decodeMs(Bench b, CudaModel m, PagedKvCache kv, String policy, int L, int steps) {
    try (GpuPolicy p = GpuPolicy.open(PolicySpec.parse(policy), m.env(null))) {
      return decodeMs(m, kv, p, L, steps, PROFILED.contains(policy));
    } catch (RuntimeException e) {
      b.log().println("end-to-end " + policy + " failed: " + e);
      return null;
    }
  }

  /**
   * Policies whose timed decode steps a profiler records (cuProfilerStart/Stop around them; nothing without
   * one): -Dlongsieve.bench.profile=dense,decode=tokenselect with e.g. `nsys profile
   * --capture-range=cudaProfilerApi` gives each kernel's GPU time inside whole steps.
   */
  static final List<String> PROFILED = List.of(System.getProperty("longsieve.bench.profile", "").split(","));

  /**
   * Medians over decode steps (token picked on the device, one synchronisation per step); with profile
   * set the timed steps (not the two warm-up ones) are a profiler range.
   */
  private static Step decodeMs(CudaModel m, PagedKvCache kv, GpuPolicy p, int L, int steps, boolean profile) {
    int[] len = new int[kv.layers];
    for (int l = 0; l < kv.layers; l++) len[l] = kv.length(l);
    double[] t = new double[steps], host = new double[steps];
    long launches = 0;
    for (int s = 0; s < steps + 2; s++) {
      if (profile && s == 2) JCudaDriver.cuProfilerStart();
      long ts = System.nanoTime(), l0 = Launcher.LAUNCHES.sum();
      m.decode(0, true, L + s, kv, p);
      m.sampleGreedy();
      long th = System.nanoTime();
      m.readToken();
      if (s >= 2) {  // two warm-up steps (first launches, workspace growth)
        t[s - 2] = (System.nanoTime() - ts) / 1e6;
        host[s - 2] = (th - ts) / 1e6;
        launches = Launcher.LAUNCHES.sum() - l0;
      }
    }
    if (profile) JCudaDriver.cuProfilerStop();
    for (int l = 0; l < kv.layers; l++) kv.setLength(l, len[l]);  // the next policy decodes from the same context
    Arrays.sort(t);
    Arrays.sort(host);
    return new Step(t[steps / 2], host[steps / 2], launches);
  }
}
