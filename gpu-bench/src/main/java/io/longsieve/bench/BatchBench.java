package io.longsieve.bench;

import io.longsieve.cuda.CudaModel;
import io.longsieve.cuda.CudaRunner;
import io.longsieve.cuda.CudaWeights;
import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.policy.GpuPolicy;
import io.longsieve.cuda.policy.GpuTokenSelect;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import java.util.Arrays;
import java.util.Locale;
import java.util.Random;

/**
 * Batched decode on the synthetic Llama-3.1-8B (issue 7 §3 on the GPU): B sequences of L prompt
 * tokens each decode one token per step through {@link CudaModel#decodeBatch} (every weight matrix
 * streamed once per step for all B rows), against B = 1 through the same call. Rows give ms per
 * step and tokens per second over the batch; the ratio is to B = 1 in the same run.
 *
 * <p>{@link #policies} does the same at long contexts per decode policy (issue 5 §4's end-to-end
 * target as an executor meets it: several documents decoding together share each pass over the
 * weights, so the attention's share of a step, and what a sparse policy saves, grows with B).
 */
public final class BatchBench {
  private BatchBench() {}

  public static void run(Bench b, ModelConfig c, int promptTokens, int steps, int[] batches, int[] graphBatches) {
    CudaContext ctx = b.ctx();
    Kernels k = b.kernels();
    int maxB = Math.max(Arrays.stream(batches).max().orElse(1), Arrays.stream(graphBatches).max().orElse(1));
    PagedKvCache[] kvs = new PagedKvCache[maxB];
    try (CudaWeights w = CudaWeights.synthetic(ctx, k, c, 11);
         CudaModel m = new CudaModel(c, ctx, k, w, Math.max(promptTokens, CudaRunner.MIN_GPU_CHUNK))) {
      Random r = new Random(5);
      for (int i = 0; i < maxB; i++) kvs[i] = new PagedKvCache(ctx, c, promptTokens + steps + 4);
      m.reserveDecode(kvs[0].capacity);
      double base = Double.NaN;
      for (int bs : batches) {
        for (int i = 0; i < bs; i++) {  // a fresh prompt per sequence
          kvs[i].reset();
          int[] ids = new int[promptTokens];
          for (int t = 0; t < ids.length; t++) ids[t] = r.nextInt(c.vocabSize());
          m.prefill(ids, 0, kvs[i], null);
        }
        int[] tokens = new int[bs], pos = new int[bs], next = new int[bs];
        double[] zero = new double[bs], one = new double[bs];
        Arrays.fill(one, 1.0);
        PagedKvCache[] group = Arrays.copyOf(kvs, bs);
        GpuPolicy[] dense = new GpuPolicy[bs];  // null: dense attention
        double[] t = new double[steps];
        for (int s = 0; s < steps + 2; s++) {
          for (int i = 0; i < bs; i++) pos[i] = promptTokens + s;
          long t0 = System.nanoTime();
          m.decodeBatch(tokens, pos, group, dense, bs);
          m.pickBatch(bs, zero, one, zero, next);  // greedy; waits for the step
          if (s >= 2) t[s - 2] = (System.nanoTime() - t0) / 1e6;
          System.arraycopy(next, 0, tokens, 0, bs);
        }
        Arrays.sort(t);
        double ms = t[steps / 2], tps = bs * 1000 / ms;
        if (bs == 1) base = tps;
        b.add(new Bench.Row("batch", "batched decode B=" + bs + " L=" + promptTokens,
            String.format(Locale.ROOT, "%.0f tok/s; %.2fx B=1", tps, tps / base), ms, Double.NaN, Double.NaN,
            tps / base, Double.NaN));
      }
      graphs(b, c, m, kvs, promptTokens, steps, graphBatches, r, "");
      // B = 1 as an engine that decodes one sequence a step runs it (maxBatch 1: the CUDA-core GEMV, Gemv)
      try (CudaModel one = new CudaModel(c, ctx, b.kernelsForOneSequence(), w, Math.max(promptTokens, CudaRunner.MIN_GPU_CHUNK))) {
        one.reserveDecode(kvs[0].capacity);
        graphs(b, c, one, kvs, promptTokens, steps, new int[] {1}, r, ", one-sequence engine");
      }
    } finally {
      for (PagedKvCache kv : kvs) if (kv != null) kv.close();
    }
  }

  /**
   * The same batches through {@link CudaModel#decodeDense}: each group of up to
   * {@link CudaModel#MAX_DECODE_BATCH} sequences one CUDA graph per step (batches above that run
   * as several groups, as the engine runs them); tokens/s against B = 1 through the same path.
   */
  private static void graphs(Bench b, ModelConfig c, CudaModel m, PagedKvCache[] kvs, int promptTokens, int steps,
                             int[] batches, Random r, String label) {
    int g = CudaModel.MAX_DECODE_BATCH;
    double base = Double.NaN;
    for (int bs : batches) {
      for (int i = 0; i < bs; i++) {
        kvs[i].reset();
        int[] ids = new int[promptTokens];
        for (int t = 0; t < ids.length; t++) ids[t] = r.nextInt(c.vocabSize());
        m.prefill(ids, 0, kvs[i], null);
      }
      int[] all = new int[bs], tokens = new int[g], pos = new int[g], next = new int[g];
      float[] zero = new float[g], one = new float[g];
      Arrays.fill(one, 1f);
      double[] t = new double[steps];
      for (int s = 0; s < steps + 2; s++) {
        long t0 = System.nanoTime();
        for (int s0 = 0; s0 < bs; s0 += g) {
          int n = Math.min(g, bs - s0);
          Arrays.fill(pos, promptTokens + s);
          System.arraycopy(all, s0, tokens, 0, n);
          m.decodeDense(tokens, pos, Arrays.copyOfRange(kvs, s0, s0 + n), zero, one, zero, n, next);
          System.arraycopy(next, 0, all, s0, n);
        }
        if (s >= 2) t[s - 2] = (System.nanoTime() - t0) / 1e6;
      }
      Arrays.sort(t);
      double ms = t[steps / 2], tps = bs * 1000 / ms;
      if (bs == 1) base = tps;
      b.add(new Bench.Row("batch", "batched decode B=" + bs + " L=" + promptTokens + " (CUDA graphs" + label + ")",
          String.format(Locale.ROOT, "%.0f tok/s; %.2fx B=1 through graphs", tps, tps / base), ms, Double.NaN,
          Double.NaN, tps / base, Double.NaN));
    }
  }

  /**
   * Decode policies of {@link #policies}, each against dense at the same B and context. cache=on,threshold=-1 makes
   * every TokenSelect step after a layer's first a Selection Cache hit (cosine ≥ -1 always holds): the
   * hit step's cost, which random weights (near-random consecutive queries) never reach by themselves.
   */
  static final String[] POLICIES = {"dense", "decode=tokenselect", "decode=tokenselect:index=int4",
      "decode=tokenselect:cache=on,threshold=-1", "decode=streaming", "decode=quest"};

  /** Device bytes one sequence of {@link #policies} takes at a capacity: its cache and TokenSelect's int4 copy. */
  static long sequenceBytes(ModelConfig c, int capacity) {
    // each layer's int4 keys and scales, sized as GpuTokenSelect.index grows them
    long slots = GpuTokenSelect.int4Slots(capacity);
    long layer = CudaContext.grownBytes(slots * c.numKvHeads() * (c.headDim() / 2))
        + CudaContext.grownBytes(slots * c.numKvHeads() * 4);
    return PagedKvCache.bytesFor(c, capacity) + c.numLayers() * layer;
  }

  /** Most sequences of capacity slots that fit in free bytes (keeping spare for workspaces), at most the batch limit. */
  static int maxSequences(ModelConfig c, int capacity, long free, long spare) {
    long n = Math.max(0, free - spare) / sequenceBytes(c, capacity);
    return (int) Math.min(n, CudaModel.MAX_DECODE_BATCH);
  }

  /**
   * At each context L, B sequences (each batch size that fits in device memory) decode one token per
   * step through {@link CudaModel#decodeBatch}, every sequence under its own instance of each policy
   * of {@link #POLICIES}. The caches are filled with random bf16 on the device instead of prefilled:
   * random weights would give near-random keys and values anyway, and B prefills of 128K tokens would
   * take most of a device call; the kernels' cost depends on the bytes and the selection sizes, not on
   * the values. Rows: ms per step (median of steps after two warm-up steps, the first of which builds
   * TokenSelect's int4 copy), tokens/s over the batch, the ratio to dense at the same L and B, the
   * Selection Cache hit rate the policy reports and the host's enqueue time per step (when it nears
   * the step's time, launches bound the step, not the GPU).
   */
  public static void policies(Bench b, ModelConfig c, int[] contexts, int steps, int[] batches) {
    CudaContext ctx = b.ctx();
    Kernels k = b.kernels();
    int maxL = Arrays.stream(contexts).max().orElse(0);
    try (CudaWeights w = CudaWeights.synthetic(ctx, k, c, 11);
         CudaModel m = new CudaModel(c, ctx, k, w, CudaRunner.MIN_GPU_CHUNK)) {
      m.reserveDecode(maxL + steps + 4);
      for (int L : contexts) {
        int capacity = L + steps + 4;
        int fit = maxSequences(c, capacity, ctx.budgetBytes() - ctx.usedBytes(), 2L << 30);
        int[] sizes = Arrays.stream(batches).filter(x -> x <= fit).toArray();
        b.log().printf(Locale.ROOT, "batched policies L=%d: %d sequences fit, batches %s%n", L, fit, Arrays.toString(sizes));
        if (sizes.length == 0) continue;
        PagedKvCache[] kvs = new PagedKvCache[sizes[sizes.length - 1]];
        try {
          for (int i = 0; i < kvs.length; i++) kvs[i] = randomCache(ctx, k, c, capacity, 100 + 10 * i);
          for (int bs : sizes) {
            for (boolean stepped : new boolean[] {false, true}) {
              double denseMs = Double.NaN;
              for (String policy : POLICIES) {
                Cell cell = cell(b, m, Arrays.copyOf(kvs, bs), policy, L, steps, stepped);
                if (cell == null) continue;
                if (policy.equals("dense")) denseMs = cell.ms;
                double savedUs = (denseMs - cell.ms) * 1000 / (c.numLayers() * bs);  // per layer and sequence
                b.add(new Bench.Row("batch-policy", "decode B=" + bs + " L=" + L + " " + policy
                    + (stepped ? " (CUDA graphs)" : ""),
                    String.format(Locale.ROOT, "%.1f tok/s; %.2fx dense; saves %.1f us/layer; hits %s; host %s",
                        bs * 1000 / cell.ms, denseMs / cell.ms, savedUs,
                        Double.isNaN(cell.hitRate) ? "-" : String.format(Locale.ROOT, "%.2f", cell.hitRate),
                        Double.isNaN(cell.hostMs) ? "-" : String.format(Locale.ROOT, "%.2f ms", cell.hostMs)),
                    cell.ms, Double.NaN, Double.NaN, denseMs / cell.ms, Double.NaN));
              }
            }
          }
        } finally {
          for (PagedKvCache kv : kvs) if (kv != null) kv.close();
        }
      }
    }
  }

  /**
   * A cache of capacity slots, every slot of every layer random (pre-RoPE keys, rotated keys, values);
   * {@link #cell} sets its lengths.
   */
  private static PagedKvCache randomCache(CudaContext ctx, Kernels k, ModelConfig c, int capacity, long seed) {
    PagedKvCache kv = new PagedKvCache(ctx, c, capacity);
    long elems = (long) kv.pages * kv.nKv * kv.pageSize * kv.headDim;  // a private pool: every page, identity table
    for (int l = 0; l < kv.layers; l++) ColdLists.fillRandomKv(k, kv.layer(l), elems, seed + 3L * l);
    return kv;
  }

  /** One row's medians: ms per step, the host's enqueue ms per step, the mean Selection Cache hit rate (NaN: none). */
  private record Cell(double ms, double hostMs, double hitRate) {}

  /**
   * Steps of kvs.length sequences from position L under one policy each; null (logged) when the policy
   * fails, or, stepped, when it does not run in captured steps. stepped: through {@link CudaModel#decodeStep}
   * with graphs (the engine's default path; the host's time is then not separated from the wait), else
   * {@link CudaModel#decodeBatch} eagerly.
   */
  private static Cell cell(Bench b, CudaModel m, PagedKvCache[] kvs, String policy, int L, int steps, boolean stepped) {
    int bs = kvs.length;
    GpuPolicy[] ps = new GpuPolicy[bs];
    try {
      for (int i = 0; i < bs; i++) ps[i] = GpuPolicy.open(PolicySpec.parse(policy), m.env(null));
      if (stepped && !ps[0].decodesDense() && !ps[0].capturesDecode()) return null;
      for (PagedKvCache kv : kvs) for (int l = 0; l < kv.layers; l++) kv.setLength(l, L);
      float[] zeroF = new float[bs], oneF = new float[bs];
      Arrays.fill(oneF, 1f);
      m.useDecodeGraphs(true);
      int[] tokens = new int[bs], pos = new int[bs], next = new int[bs];
      for (int i = 0; i < bs; i++) tokens[i] = 1 + i;
      double[] zero = new double[bs], one = new double[bs];
      Arrays.fill(one, 1.0);
      double[] t = new double[steps], host = new double[steps];
      for (int s = 0; s < steps + 3; s++) {  // a captured step's graph is made at its second step, replayed from its third
        Arrays.fill(pos, L + s);
        long t0 = System.nanoTime(), th;
        if (stepped) {
          m.decodeStep(tokens, pos, kvs, ps, zeroF, oneF, zeroF, bs, next);  // greedy; waits for the step
          th = Long.MIN_VALUE;
        } else {
          m.decodeBatch(tokens, pos, kvs, ps, bs);
          th = System.nanoTime();
          m.pickBatch(bs, zero, one, zero, next);  // greedy; waits for the step
        }
        if (s >= 3) {
          t[s - 3] = (System.nanoTime() - t0) / 1e6;
          host[s - 3] = th == Long.MIN_VALUE ? Double.NaN : (th - t0) / 1e6;
        }
        System.arraycopy(next, 0, tokens, 0, bs);
      }
      double hits = 0;
      for (GpuPolicy p : ps) hits += p.stats().selectionCacheHitRate() / bs;
      Arrays.sort(t);
      Arrays.sort(host);
      return new Cell(t[steps / 2], host[steps / 2], hits);
    } catch (RuntimeException e) {
      b.log().println("batched " + policy + " B=" + bs + " L=" + L + " failed: " + e);
      b.kernels().stream().synchronize();
      return null;
    } finally {
      for (GpuPolicy p : ps) if (p != null) p.close();
    }
  }
}
