package io.longsieve.bench;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kv.KvPagePool;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.policy.GpuEnv;
import io.longsieve.cuda.policy.GpuParts;
import io.longsieve.cuda.policy.GpuSelKv;
import io.longsieve.cuda.policy.GpuSnapKv;
import io.longsieve.cuda.policy.LayerCall;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.SelectionStats;
import java.util.ArrayList;
import java.util.List;
import jcuda.driver.CUdeviceptr;

/**
 * KV compression on Llama-3.1-8B shapes: the time SelKV (ratio 0.25) and SnapKV (defaults) take to
 * compress one layer at each context, and what compression buys in memory: device bytes one
 * 128K-token document holds dense and after SelKV 0.25 (kPre, kRope, v pages, page table, bias),
 * and how many such documents a {@link KvPagePool} over the free GPU memory (after 16 GB of 8B
 * weights) actually holds, each filled, compressed with random observation queries and shrunk.
 * Failure semantics: CUDA errors propagate; a context too large for the device is skipped with a log line.
 */
public final class KvCompressionBench {
  private KvCompressionBench() {}

  private static final long WEIGHTS_8B = 16L << 30;
  private static final long HEADROOM = 3L << 30;  // compression scratch, workspaces, the sequences' tables
  private static final int DOC = 131072;
  private static final int DECODE_ROOM = 1024;    // slots each document may still grow by

  public static void run(Bench b, ModelConfig c, int[] contexts) {
    for (int L : contexts) {
      compressTime(b, c, L, "selkv:ratio=0.25");
      compressTime(b, c, L, "snapkv");
    }
    concurrency(b, c);
  }

  private static GpuParts.Kv part(String policy, SelectionStats stats, GpuEnv env) {
    PolicySpec spec = PolicySpec.parse(policy);
    return spec.kv().name().equals("selkv") ? new GpuSelKv(spec.kv(), stats, env) : new GpuSnapKv(spec.kv(), stats, env);
  }

  /** Random observation queries (window rows, f32) shown to the part for every layer of kv, the prompt ending at n. */
  private static void observe(GpuParts.Kv part, PagedKvCache kv, DeviceBuffer qPre, int qDim, int rows, int n) {
    for (int l = 0; l < kv.layers; l++) {
      part.observe(new LayerCall(l, rows, n - rows, n - rows, qPre.ptr(), qDim, null, kv.layer(l), null));
    }
  }

  /** qPre (rows, qDim) f32 with random bf16-representable values. */
  private static DeviceBuffer randomQueries(Bench b, int rows, int qDim, long seed) {
    CudaContext ctx = b.ctx();
    DeviceBuffer q = ctx.alloc((long) rows * qDim * 4, "bench observation queries");
    try (DeviceBuffer tmp = ctx.alloc((long) rows * qDim * 2, "bench bf16 queries")) {
      b.kernels().fillRandomBf16(tmp.ptr(), (long) rows * qDim, seed, 1f);
      b.kernels().bf16ToF32(q.ptr(), tmp.ptr(), (long) rows * qDim);
      b.stream().synchronize();
    }
    return q;
  }

  private static void compressTime(Bench b, ModelConfig c, int L, String policy) {
    ModelConfig one = Bench.withLayers(c, 1);
    CudaContext ctx = b.ctx();
    Kernels k = b.kernels();
    try (PagedKvCache kv = new PagedKvCache(ctx, one, L); Kernels.Workspace ws = new Kernels.Workspace(ctx);
         DeviceBuffer invFreq = ctx.alloc(c.headDim() / 2 * 4L, "bench invFreq");
         DeviceBuffer q = randomQueries(b, 64, c.qDim(), 11)) {
      invFreq.upload(new Rope(c).inverseFrequencies());
      Kernels.KvView v = kv.layer(0);
      long elems = (long) kv.poolPages() * c.numKvHeads() * kv.pageSize * c.headDim();
      ColdLists.fillRandomKv(k, v, elems, 7);
      GpuEnv env = new GpuEnv(one, ctx, k, ws, invFreq.ptr(), null);
      try (GpuParts.Kv part = part(policy, new SelectionStats(1), env)) {
        observe(part, kv, q, c.qDim(), 64, L);
        double ms = b.medianMs(() -> {
          kv.setLength(0, L);  // the same (already rewritten) cache again: the work does not depend on the values
          part.compress(kv);
        }, 1, L >= 65536 ? 3 : 5);
        b.add(new Bench.Row("kv compression", policy + " compress one layer L=" + L,
            c.numKvHeads() + "x" + L + "x" + c.headDim() + " -> " + kv.length(0), ms, Double.NaN, Double.NaN, Double.NaN,
            Double.NaN));
      }
    } catch (IllegalStateException e) {
      b.log().println("kv compression L=" + L + " skipped: " + e.getMessage());
    }
  }

  /** Documents of DOC tokens in a pool over the free memory: dense, then SelKV 0.25 (compressed and shrunk). */
  private static void concurrency(Bench b, ModelConfig c) {
    CudaContext ctx = b.ctx();
    Kernels k = b.kernels();
    long free = ctx.budgetBytes() - ctx.usedBytes() - WEIGHTS_8B - HEADROOM;
    // outside the pool stays room for the SelKV documents' logit biases, (layer, capacity, nHeads) f32 each
    // (0.54 GB at 128K on Llama-3.1-8B shapes): their share of what one compressed document takes, plus 1 %
    double bias = (double) c.numLayers() * (DOC + DECODE_ROOM) * c.numHeads() * 4;
    double share = bias / (bias + 0.25 * PagedKvCache.bytesFor(c, DOC + DECODE_ROOM)) + 0.01;
    int pages = KvPagePool.pagesFitting(c, (long) (free * (1 - share)));
    if (pages < (DOC + DECODE_ROOM) / Kernels.PAGE_SIZE) {
      b.log().println("kv concurrency skipped: " + free / (1 << 20) + " MiB free after weights");
      return;
    }
    try (KvPagePool pool = new KvPagePool(ctx, c, pages); Kernels.Workspace ws = new Kernels.Workspace(ctx);
         DeviceBuffer invFreq = ctx.alloc(c.headDim() / 2 * 4L, "bench invFreq");
         DeviceBuffer q = randomQueries(b, 32, c.qDim(), 12)) {
      invFreq.upload(new Rope(c).inverseFrequencies());
      for (int layer = 0; layer < c.numLayers(); layer++) {  // random contents once: pages keep them
        long elems = pool.layerBytes / 2;
        k.fillRandomBf16(pool.kPre(layer), elems, 20 + layer, 1f);
        k.fillRandomBf16(pool.kRope(layer), elems, 60 + layer, 1f);
        k.fillRandomBf16(pool.v(layer), elems, 100 + layer, 1f);
      }
      GpuEnv env = new GpuEnv(c, ctx, k, ws, invFreq.ptr(), null);
      String shape = "128K tokens, pool " + pages + " pages of " + KvPagePool.pageBytes(c) / (1 << 20) + " MiB";
      long[] denseBytes = new long[1];
      int dense = fill(b, c, pool, null, env, q, denseBytes);
      b.add(new Bench.Row("kv memory", "dense: device bytes per 128K document", shape, Double.NaN, Double.NaN,
          denseBytes[0] / 1e9, Double.NaN, Double.NaN));
      b.add(new Bench.Row("kv memory", "dense: concurrent 128K documents", shape, Double.NaN, Double.NaN, dense,
          Double.NaN, Double.NaN));
      long[] selBytes = new long[1];
      int sel = fill(b, c, pool, "selkv:ratio=0.25", env, q, selBytes);
      b.add(new Bench.Row("kv memory", "selkv 0.25: device bytes per 128K document", shape, Double.NaN, Double.NaN,
          selBytes[0] / 1e9, Double.NaN, Double.NaN));
      b.add(new Bench.Row("kv memory", "selkv 0.25: concurrent 128K documents", shape, Double.NaN, Double.NaN, sel,
          Double.NaN, Double.NaN));
      double ratio = dense == 0 ? Double.NaN : sel / (double) dense;
      b.add(new Bench.Row("kv memory", "selkv 0.25 / dense concurrent documents (target >= 3.5)", shape, Double.NaN,
          Double.NaN, ratio, ratio / 3.5, Double.NaN));
    }
  }

  /**
   * Takes documents from the pool until it is full; returns how many fit and (in bytes[0]) what
   * the first one holds. With a policy each is compressed and shrunk before the next: the first
   * with the full policy (merge included), the rest with merge=off plus the bias buffer the merge
   * would allocate, which leaves exactly the same memory (the merge only rewrites kept slots).
   */
  private static int fill(Bench b, ModelConfig c, KvPagePool pool, String policy, GpuEnv env, DeviceBuffer q,
                          long[] bytes) {
    List<PagedKvCache> docs = new ArrayList<>();
    int count = 0;
    try {
      while (true) {
        try {
          PagedKvCache kv = new PagedKvCache(b.ctx(), c, DOC + DECODE_ROOM, pool);
          docs.add(kv);
          kv.reserve(DOC);
          for (int l = 0; l < c.numLayers(); l++) kv.advance(l, DOC);
          if (policy != null) {
            String p = count == 0 ? policy : policy + ",merge=off";
            try (GpuParts.Kv part = part(p, new SelectionStats(c.numLayers()), env)) {
              observe(part, kv, q, c.qDim(), 32, DOC);
              long t = System.nanoTime();
              part.compress(kv);
              if (count == 0) b.log().printf("  first document compressed (%s) in %.0f ms%n", p, (System.nanoTime() - t) / 1e6);
              if (count > 0) kv.ensureBias();
            }
          }
          if (count == 0) bytes[0] = kv.deviceBytes();
          count++;
        } catch (IllegalStateException full) {  // the pool (or the context's budget) is exhausted
          b.log().println("  full after " + count + " documents: " + full.getMessage());
          break;
        }
      }
    } finally {
      for (PagedKvCache kv : docs) kv.close();
    }
    return count;
  }
}
