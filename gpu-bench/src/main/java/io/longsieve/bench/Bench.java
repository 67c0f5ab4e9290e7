package io.longsieve.bench;

import static jcuda.driver.JCudaDriver.cuGraphDestroy;
import static jcuda.driver.JCudaDriver.cuGraphExecDestroy;
import static jcuda.driver.JCudaDriver.cuGraphInstantiate;
import static jcuda.driver.JCudaDriver.cuGraphLaunch;
import static jcuda.driver.JCudaDriver.cuMemcpyDtoDAsync;
import static jcuda.driver.JCudaDriver.cuStreamBeginCapture;
import static jcuda.driver.JCudaDriver.cuStreamEndCapture;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.cuda.CudaModel;
import io.longsieve.cuda.CudaWeights;
import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.driver.KernelModule;
import io.longsieve.cuda.kernels.Gemv;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.RopeScaling;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUgraph;
import jcuda.driver.CUgraphExec;
import jcuda.driver.CUstream;
import jcuda.driver.CUstreamCaptureMode;

/**
 * The engine benchmark on a synthetic Llama-3.1-8B (random bf16 weights made on the GPU): the
 * ceilings of this GPU re-measured in the same run (device copy; bf16 matmul from the PyTorch peer
 * file when given), the prefill GEMMs and decode GEMVs on their own, prefill and decode attention
 * on their own, then whole prefills and decode steps at each context with the time per layer split
 * into GEMMs, attention and the rest. Results are rows of (section, name, shape, ms, TFLOP/s, GB/s,
 * fraction of ceiling, peer ms) for the CSV.
 */
public final class Bench implements AutoCloseable {

  /** Llama-3.1-8B's shapes (config.json of meta-llama/Llama-3.1-8B). */
  public static ModelConfig llama3_8b() {
    return new ModelConfig("llama", 4096, 14336, 32, 32, 8, 128, 128256, 1e-5, 500000,
        new RopeScaling("llama3", 8, 1, 4, 8192), 131072, false, false, 0, 128000, List.of(128001));
  }

  /**
   * c's shapes with {@code layers} layers and no tied embeddings or special tokens: the caches the
   * kernel benchmarks fill with random data.
   */
  static ModelConfig withLayers(ModelConfig c, int layers) {
    return new ModelConfig("llama", c.hiddenSize(), c.intermediateSize(), layers, c.numHeads(), c.numKvHeads(),
        c.headDim(), c.vocabSize(), c.rmsNormEps(), c.ropeTheta(), c.ropeScaling(), c.maxPositions(), false, false, 0, 0,
        List.of());
  }

  /** c's shapes with another head size (same head counts): the attention benchmarks at head_dim 64. */
  public static ModelConfig withHeadDim(ModelConfig c, int headDim) {
    return new ModelConfig("llama", c.hiddenSize(), c.intermediateSize(), c.numLayers(), c.numHeads(), c.numKvHeads(),
        headDim, c.vocabSize(), c.rmsNormEps(), c.ropeTheta(), c.ropeScaling(), c.maxPositions(), false, false, 0, 0,
        List.of());
  }

  /** One result line. NaN where a column does not apply. */
  public record Row(String section, String name, String shape, double ms, double tflops, double gbps, double fraction,
                    double peerMs) {}

  private final CudaContext ctx;
  private final KernelModule module;
  private final CudaStream stream;
  private final Kernels k;      // as an engine that batches runs them (the tensor-core decode GEMV)
  private final Kernels kOne;   // as an engine that decodes one sequence a step runs them (Gemv)
  private final PrintStream log;
  private final List<Row> rows = new ArrayList<>();
  private final JsonNode peer;
  private double copyGbps = Double.NaN;
  private double matmulTflops = Double.NaN;

  public Bench(int ordinal, Path peerJson, PrintStream log) throws IOException {
    this.ctx = new CudaContext(ordinal, 0.95);
    this.module = new KernelModule(ctx);
    this.stream = new CudaStream(ctx);
    this.k = new Kernels(module, stream, Gemv.forBatch(8));
    this.kOne = new Kernels(module, stream, Gemv.forBatch(1));
    this.log = log;
    this.peer = peerJson != null && Files.isRegularFile(peerJson) ? new ObjectMapper().readTree(peerJson.toFile()) : null;
    if (peer != null) matmulTflops = peer.path("ceilings").path("matmul_tflops").asDouble(Double.NaN);
  }

  public String device() {
    return ctx.describe();
  }

  public List<Row> rows() {
    return rows;
  }

  CudaContext ctx() {
    return ctx;
  }

  Kernels kernels() {
    return k;
  }

  /** The kernels as an engine with maxBatch 1 runs them (the CUDA-core decode GEMV). */
  Kernels kernelsForOneSequence() {
    return kOne;
  }

  CudaStream stream() {
    return stream;
  }

  /** A ceiling from the peer file (e.g. "fp8_matmul_tflops"), NaN without one. */
  double peerCeiling(String key) {
    return peer == null ? Double.NaN : peer.path("ceilings").path(key).asDouble(Double.NaN);
  }

  /** The device copy ceiling measured by {@link #copyCeiling} (GB/s, read + written), NaN before. */
  double copyGbps() {
    return copyGbps;
  }

  PrintStream log() {
    return log;
  }

  /** Runs one section; a failure is logged and the next section still runs (one run measures as much as it can). */
  public void section(String name, Runnable body) {
    log.println("== bench: " + name);
    long t0 = System.nanoTime();
    try {
      body.run();
    } catch (RuntimeException e) {
      log.println("bench section '" + name + "' failed: " + e);
      e.printStackTrace(log);
      kernels().stream().synchronize();
    }
    log.printf(Locale.ROOT, "== %s took %.1f s%n", name, (System.nanoTime() - t0) / 1e9);
  }

  /** Records a row and logs it at once, so a run cut short still shows what it measured. */
  void add(Row r) {
    rows.add(r);
    log.printf(Locale.ROOT, "  %s | %s | %s | ms %.4f | TFLOP/s %.1f | GB/s %.0f | of ceiling %.3f | peer ms %.4f%n", r.section(),
        r.name(), r.shape(), r.ms(), r.tflops(), r.gbps(), r.fraction(), r.peerMs());
  }

  double peerMs(String group, String key) {
    return peer == null ? Double.NaN : peer.path(group).path(key).asDouble(Double.NaN);
  }

  /**
   * PyTorch's causal prefill SDPA at L tokens for this head size: the faster of its default backend
   * choice ({@code sdpa_prefill}, cuDNN on an H200) and flash-only ({@code sdpa_prefill_flash}), so a
   * "vs PyTorch" ratio is against the fastest of what PyTorch gives by default. A peer file from before
   * issue 15 holds flash-only under {@code sdpa_prefill} and no flash row: then that one.
   */
  double peerPrefillMs(int headDim, int L) {
    return peerPrefillMs(peer, headDim, L);
  }

  static double peerPrefillMs(JsonNode peer, int headDim, int L) {
    if (peer == null) return Double.NaN;
    String sfx = headDim == 128 ? "" : "_d" + headDim, key = String.valueOf(L);
    double def = peer.path("sdpa_prefill" + sfx).path(key).asDouble(Double.NaN);
    double flash = peer.path("sdpa_prefill_flash" + sfx).path(key).asDouble(Double.NaN);
    return Double.isNaN(def) ? flash : Double.isNaN(flash) ? def : Math.min(def, flash);
  }

  /** The backend PyTorch's default SDPA choice ran at this head size (peer's profiler), or "?". */
  String peerBackend(int headDim) {
    return peer == null ? "?" : peer.path("sdpa_backend").path(String.valueOf(headDim)).path("backend").asText("?");
  }

  /** The peer's SDPA prefill rows as rows of their own (section "peer"), so the CSV shows both backends. */
  public void peerAttentionRows(int heads, int[] headDims, int[] contexts) {
    if (peer == null) return;
    for (int d : headDims) {
      String sfx = d == 128 ? "" : "_d" + d;
      for (int L : contexts) {
        double flops = 4.0 * heads * d * ((double) L * (L + 1) / 2);
        for (String[] g : new String[][] {{"sdpa_prefill" + sfx, "default (" + peerBackend(d) + ")"},
            {"sdpa_prefill_flash" + sfx, "flash-only"}}) {
          double ms = peerMs(g[0], String.valueOf(L));
          if (Double.isNaN(ms)) continue;
          add(new Row("peer", "PyTorch SDPA prefill " + g[1] + " d=" + d + " L=" + L, "1x" + heads + "x" + L + "x" + d,
              ms, flops / ms / 1e9, Double.NaN, flops / ms / 1e9 / matmulTflops, Double.NaN));
        }
      }
    }
  }

  /** Median of reps timings of body, after warm-up runs, with events on the stream. */
  double medianMs(Runnable body, int warm, int reps) {
    return medianMs(body, warm, reps, 1);
  }

  /**
   * As above, timing {@code inner} back-to-back runs per sample and dividing: for kernels of tens
   * of microseconds, so the host's launch cost overlaps the GPU as it does inside a decode step.
   */
  double medianMs(Runnable body, int warm, int reps, int inner) {
    for (int i = 0; i < warm; i++) body.run();
    double[] t = new double[reps];
    for (int i = 0; i < reps; i++) {
      try (CudaStream.Event a = stream.record()) {
        for (int j = 0; j < inner; j++) body.run();
        try (CudaStream.Event b = stream.record()) {
          t[i] = b.millisSince(a) / inner;
        }
      }
    }
    Arrays.sort(t);
    return t[reps / 2];
  }
  /**
   * Milliseconds per call of {@code inner} calls captured into one CUDA graph and replayed (median of reps):
   * what the kernels take on the GPU once the host's per-launch cost is gone. The calls must not allocate or
   * synchronise (run one first to size the scratch). NaN, with the reason on stderr, where capture fails.
   */
  double graphMs(Runnable call, int inner, int reps) {
    CUstream s = stream().handle();
    stream().synchronize();
    CUgraph graph = new CUgraph();
    CUgraphExec exec = new CUgraphExec();
    boolean captured = false, instantiated = false;
    try {
      cuStreamBeginCapture(s, CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED);
      try {
        for (int i = 0; i < inner; i++) call.run();
      } finally {
        cuStreamEndCapture(s, graph);
        captured = true;
      }
      cuGraphInstantiate(exec, graph, 0);
      instantiated = true;
      return medianMs(() -> cuGraphLaunch(exec, s), 3, reps) / inner;
    } catch (RuntimeException e) {
      System.err.println("bench: CUDA graph capture failed: " + e);
      return Double.NaN;
    } finally {
      if (instantiated) cuGraphExecDestroy(exec);
      if (captured) cuGraphDestroy(graph);
      stream().synchronize();
    }
  }


  /** Device-to-device copy of 2 GiB: bytes read plus written per second. */
  public void copyCeiling() {
    long bytes = 2L << 30;
    try (DeviceBuffer a = ctx.alloc(bytes, "copy src"); DeviceBuffer b = ctx.alloc(bytes, "copy dst")) {
      k.fillRandomBf16(a.ptr(), bytes / 2, 1, 1f);
      double ms = medianMs(() -> cuMemcpyDtoDAsync(b.ptr(), a.ptr(), bytes, stream.handle()), 2, 9);
      copyGbps = 2.0 * bytes / ms / 1e6;
      add(new Row("ceiling", "device copy (cuMemcpyDtoD)", "2 GiB", ms, Double.NaN, copyGbps, 1, Double.NaN));
      add(new Row("ceiling", "bf16 matmul (PyTorch, from peer)", "8192^3", Double.NaN, matmulTflops, Double.NaN, 1,
          Double.NaN));
      log.printf(Locale.ROOT, "ceilings: copy %.0f GB/s, matmul %.0f TFLOP/s%n", copyGbps, matmulTflops);
    }
  }

  /**
   * The feed-forward block's gate/up GEMM with its SwiGLU: fused into the GEMM's epilogue where the
   * kernels allow it (Kernels.gateUpSwiglu), against the GEMM to bf16 then swiglu_rows. out holds the
   * (m, 2 h) intermediate, then the (m, h) result.
   */
  private void gateUpSwiglu(DeviceBuffer a, DeviceBuffer out, int m, int h, int dim) {
    DeviceBuffer w = ctx.alloc(2L * h * dim * 2, "bench W gate/up");
    try (w) {
      k.fillRandomBf16(w.ptr(), 2L * h * dim, 5, 0.02f);
      CUdeviceptr gu = out.ptr(), hb = out.at((long) m * 2 * h * 2);
      double flops = 2.0 * m * 2 * h * dim;
      double fused = medianMs(() -> k.gateUpSwiglu(hb, gu, a.ptr(), w.ptr(), m, h, dim), 3, 15);
      double plain = medianMs(() -> {
        k.matmul(gu, Kernels.OUT_BF16, a.ptr(), w.ptr(), null, m, 2 * h, dim);
        k.swiglu(hb, gu, m, h);
      }, 3, 15);
      String how = k.fusesSwiglu(m, h) ? "fused" : "not fused here";
      add(new Row("gemm", "gate_up + swiglu (" + how + ")", m + "x" + 2 * h + "x" + dim, fused, flops / fused / 1e9,
          Double.NaN, flops / fused / 1e9 / matmulTflops, Double.NaN));
      add(new Row("gemm", "gate_up then swiglu_rows", m + "x" + 2 * h + "x" + dim, plain, flops / plain / 1e9,
          Double.NaN, flops / plain / 1e9 / matmulTflops, Double.NaN));
    }
  }

  /** The 8B layer's GEMMs at prefill (m tokens) and GEMV at decode (1 row), one at a time. */
  public void matmuls(ModelConfig c, int m) {
    int dim = c.hiddenSize(), h = c.intermediateSize();
    int[][] shapes = {{c.qDim() + 2 * c.kvDim(), dim}, {dim, c.qDim()}, {2 * h, dim}, {dim, h}, {c.vocabSize(), dim}};
    String[] names = {"qkv", "o", "gate_up", "down", "lm_head"};
    long maxK = h, maxN = c.vocabSize();
    try (DeviceBuffer a = ctx.alloc((long) m * maxK * 2, "bench A"); DeviceBuffer out = ctx.alloc((long) m * maxN * 2, "bench C");
         DeviceBuffer w = ctx.alloc(maxN * dim * 2 + 64, "bench W")) {
      k.fillRandomBf16(a.ptr(), (long) m * maxK, 2, 1f);
      k.fillRandomBf16(w.ptr(), maxN * dim, 3, 0.02f);
      for (int i = 0; i < shapes.length; i++) {
        int n = shapes[i][0], kk = shapes[i][1];
        if (i < 4) {
          double ms = medianMs(() -> k.gemm(out.ptr(), Kernels.OUT_BF16, a.ptr(), w.ptr(), null, m, n, kk), 3, 15);
          double tf = 2.0 * m * n * kk / ms / 1e9;
          add(new Row("gemm", names[i], m + "x" + n + "x" + kk, ms, tf, Double.NaN, tf / matmulTflops,
              peerMs("gemm", names[i])));
          if (i == 2) gateUpSwiglu(a, out, m, h, dim);
        }
        for (int b : new int[] {1, 8, 32}) {
          if (b > 1 && i != 2) continue;  // batch sweep on the widest layer only
          // rotate over copies of the weights inside the 1 GB buffer so back-to-back runs miss the 60 MB L2
          long wBytes = (long) n * kk * 2;
          int copies = (int) Math.max(1, Math.min(8, (w.bytes() - 64) / wBytes));
          int[] turn = {0};
          double ms = medianMs(() -> k.matmul(out.ptr(), Kernels.OUT_BF16, a.ptr(), w.at((turn[0]++ % copies) * wBytes), null,
              b, n, kk), 3, 15, 20);
          double gbps = ((double) n * kk * 2 + (double) b * kk * 2 + (double) b * n * 2) / ms / 1e6;
          add(new Row("gemv", names[i] + " batch " + b, b + "x" + n + "x" + kk, ms, 2.0 * b * n * kk / ms / 1e9, gbps,
              gbps / copyGbps, b == 1 ? peerMs("gemv", names[i]) : Double.NaN));
        }
        // the decode GEMV's kernels, every shape, 1-8 rows: CUDA cores (with the column count it would pick) and
        // tensor cores (with the warps it would pick), same weights rotation as above
        for (int b : new int[] {1, 2, 4, 8}) {
          for (String kernel : new String[] {"simt", "mma"}) {
            long wBytes = (long) n * kk * 2;
            int copies = (int) Math.max(1, Math.min(8, (w.bytes() - 64) / wBytes));
            int[] turn = {0};
            Runnable run = () -> {
              CUdeviceptr wt = w.at((turn[0]++ % copies) * wBytes);
              if (kernel.equals("simt")) k.gemvSimt(out.ptr(), Kernels.OUT_BF16, a.ptr(), wt, null, b, n, kk, Kernels.gemvColumns(b));
              else k.gemvMma(out.ptr(), Kernels.OUT_BF16, a.ptr(), wt, null, b, n, kk, Kernels.gemvWarps(n));
            };
            double ms = medianMs(run, 3, 15, 20);
            double gbps = ((double) n * kk * 2 + (double) b * kk * 2 + (double) b * n * 2) / ms / 1e6;
            add(new Row("gemv kernel", names[i] + " batch " + b + " " + kernel, b + "x" + n + "x" + kk, ms,
                2.0 * b * n * kk / ms / 1e9, gbps, gbps / copyGbps, Double.NaN));
          }
        }
      }
    }
  }

  /** One layer's dense attention over a cache of L tokens: prefill (L causal queries) and one decode query. */
  public void attention(ModelConfig c, int[] contexts, boolean prefill) {
    int maxL = Arrays.stream(contexts).max().orElse(0);
    ModelConfig one = withLayers(c, 1);
    float scale = (float) (1.0 / Math.sqrt(c.headDim()));
    try (PagedKvCache kv = new PagedKvCache(ctx, one, maxL); Kernels.Workspace ws = new Kernels.Workspace(ctx);
         DeviceBuffer q = ctx.alloc((long) maxL * c.qDim() * 2, "bench q");
         DeviceBuffer out = ctx.alloc((long) maxL * c.qDim() * 2, "bench out")) {
      Kernels.KvView v = kv.layer(0);
      long cacheElems = (long) kv.pages * c.numKvHeads() * kv.pageSize * c.headDim();
      k.fillRandomBf16(v.kRope(), cacheElems, 4, 1f);
      k.fillRandomBf16(v.v(), cacheElems, 5, 1f);
      k.fillRandomBf16(q.ptr(), (long) maxL * c.qDim(), 6, 1f);
      if (prefill && peer != null) {
        log.println("  peer ms of prefill attention: the faster of PyTorch SDPA's default backend ("
            + peerBackend(c.headDim()) + ") and flash-only, d=" + c.headDim());
      }
      String decodePeer = c.headDim() == 128 ? "sdpa_decode" : "sdpa_decode_d" + c.headDim();
      for (int L : contexts) {
        if (prefill) {
          double ms = medianMs(() -> k.attention(out.ptr(), q.ptr(), v, L, c.numHeads(), 0, 0, scale, ws), 1,
              L >= 65536 ? 3 : 5);
          double flops = 4.0 * c.numHeads() * c.headDim() * ((double) L * (L + 1) / 2);
          double tf = flops / ms / 1e9;
          String dn = c.headDim() == 128 ? "" : " d=" + c.headDim();
          add(new Row("attention", "prefill flash" + dn + " L=" + L, "1x" + c.numHeads() + "x" + L + "x" + c.headDim(), ms,
              tf, Double.NaN, tf / matmulTflops, peerPrefillMs(c.headDim(), L)));
        }
        k.attention(out.ptr(), q.ptr(), v, 1, c.numHeads(), L - 1, 0, scale, ws);  // sizes the workspace
        double ms = medianMs(() -> k.attention(out.ptr(), q.ptr(), v, 1, c.numHeads(), L - 1, 0, scale, ws), 3, 15, 20);
        double bytes = 2.0 * L * c.kvDim() * 2;
        double gbps = bytes / ms / 1e6;
        add(new Row("attention", "decode flash (tensor cores) L=" + L, "1x" + c.numHeads() + "x1x" + c.headDim() + " kv " + L,
            ms, Double.NaN, gbps, gbps / copyGbps, peerMs(decodePeer, String.valueOf(L))));
        double msSplit = medianMs(() -> k.splitAttention(out.ptr(), q.ptr(), v, 1, c.numHeads(), L - 1, 0, scale, ws), 3, 15, 20);
        add(new Row("attention", "decode split-K (CUDA cores) L=" + L, "same", msSplit, Double.NaN, bytes / msSplit / 1e6,
            bytes / msSplit / 1e6 / copyGbps, peerMs(decodePeer, String.valueOf(L))));
      }
    }
  }

  /**
   * Whole-model prefill of L random tokens and decode steps after it, with the per-layer split; decode
   * as an engine that runs one sequence a step (maxBatch 1) runs it.
   */
  public void model(ModelConfig c, int[] contexts, int chunk, int decodeSteps) {
    int maxL = Arrays.stream(contexts).max().orElse(0);
    try (CudaWeights w = CudaWeights.synthetic(ctx, k, c, 11); CudaModel m = new CudaModel(c, ctx, kOne, w, chunk);
         PagedKvCache kv = new PagedKvCache(ctx, c, maxL + decodeSteps + 1)) {
      double floorMs = w.bytes() / copyGbps / 1e6;
      m.reserveDecode(kv.capacity);
      Random r = new Random(1);
      int[] warm = new int[chunk];
      for (int i = 0; i < warm.length; i++) warm[i] = r.nextInt(c.vocabSize());
      m.prefill(warm, 0, kv, null);  // warm-up: module load, first launches
      m.sampleGreedy();
      m.readToken();
      for (int L : contexts) {
        kv.reset();
        int[] ids = new int[L];
        for (int i = 0; i < L; i++) ids[i] = r.nextInt(c.vocabSize());
        double[] split;
        long t0 = System.nanoTime();
        try (CudaModel.Profile p = new CudaModel.Profile()) {
          m.profile(p);
          m.prefill(ids, 0, kv, null);
          m.sampleGreedy();
          m.readToken();
          m.profile(null);
          split = p.millis();
        }
        double prefillMs = (System.nanoTime() - t0) / 1e6;
        add(new Row("model", "prefill L=" + L, "chunk " + chunk + ", " + Math.round(L / (prefillMs / 1000)) + " tok/s",
            prefillMs, Double.NaN, Double.NaN, Double.NaN, peerMs("hf_prefill", String.valueOf(L))));
        addSplit("prefill", L, split, c.numLayers());
        // decode: greedy tokens fed back on the device; one synchronisation per step (the token id)
        int pos = L;
        double[] stepMs = new double[decodeSteps];
        for (int s = 0; s < decodeSteps; s++) {
          long ts = System.nanoTime();
          m.decode(0, true, pos++, kv, null);
          m.sampleGreedy();
          m.readToken();
          stepMs[s] = (System.nanoTime() - ts) / 1e6;
        }
        Arrays.sort(stepMs);
        double dms = stepMs[decodeSteps / 2];
        add(new Row("model", "decode ms/token L=" + L, "batch 1, median of " + decodeSteps, dms, Double.NaN,
            w.bytes() / dms / 1e6, floorMs / dms, Double.NaN));
        try (CudaModel.Profile p = new CudaModel.Profile()) {
          m.profile(p);
          m.decode(0, true, pos++, kv, null);
          m.sampleGreedy();
          m.readToken();
          m.profile(null);
          addSplit("decode", L, p.millis(), c.numLayers());
        }
        // the same steps as one CUDA graph each (the engine's default for dense decoding)
        int[] tok = {0}, at = new int[1], next = new int[1];
        float[] greedy = {0}, one = {1};
        PagedKvCache[] kvs = {kv};
        for (int s = 0; s < decodeSteps + 2; s++) {
          at[0] = pos++;
          long ts = System.nanoTime();
          m.decodeDense(tok, at, kvs, greedy, one, greedy, 1, next);
          if (s >= 2) stepMs[s - 2] = (System.nanoTime() - ts) / 1e6;
          tok[0] = next[0];
        }
        Arrays.sort(stepMs);
        double gms = stepMs[decodeSteps / 2];
        double kvFloorMs = (w.bytes() + kvBytes(c, pos)) / copyGbps / 1e6;
        add(new Row("model", "decode ms/token L=" + L + " (CUDA graph)", String.format(Locale.ROOT,
            "batch 1, median of %d; %.2fx the floor with KV bytes (%.2f ms)", decodeSteps, gms / kvFloorMs, kvFloorMs),
            gms, Double.NaN, w.bytes() / gms / 1e6, floorMs / gms, Double.NaN));
      }
      add(new Row("model", "weight-streaming floor (weights / copy bw)", String.format(Locale.ROOT, "%.2f GB", w.bytes() / 1e9),
          floorMs, Double.NaN, copyGbps, 1, Double.NaN));
    }
  }

  /** Bytes one dense decode step reads from the cache at L tokens: rotated keys and values, bf16, every layer. */
  static long kvBytes(ModelConfig c, int L) {
    return 2L * c.numLayers() * L * c.kvDim() * 2;
  }

  private void addSplit(String what, int L, double[] ms, int layers) {
    add(new Row("layer", what + " per layer L=" + L + ": gemm", "", ms[CudaModel.Profile.GEMM] / layers, Double.NaN,
        Double.NaN, Double.NaN, Double.NaN));
    add(new Row("layer", what + " per layer L=" + L + ": attention", "", ms[CudaModel.Profile.ATTENTION] / layers,
        Double.NaN, Double.NaN, Double.NaN, Double.NaN));
    add(new Row("layer", what + " per layer L=" + L + ": other", "", ms[CudaModel.Profile.OTHER] / layers, Double.NaN,
        Double.NaN, Double.NaN, Double.NaN));
  }

  @Override
  public void close() {
    stream.synchronize();
    stream.close();
    module.close();
    ctx.close();
  }
}
