package io.longsieve.bench;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.policy.GpuEnv;
import io.longsieve.cuda.policy.GpuTsa;
import io.longsieve.cuda.policy.LayerCall;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.SelectionStats;
import java.util.Arrays;
import java.util.Locale;

/**
 * Token Sparse Attention against dense flash prefill on one layer of the model's shapes (issue 5
 * §3): a prefill chunk of {@value #CHUNK} queries after context − chunk cached tokens, random bf16
 * cache and queries, TSA at FIXED keep ratios (tau bypassed: {@link GpuTsa#select} with a forced
 * keep) with the proxy scoring included, split into proxy, selection (keep count, per-head top-k
 * and the one host synchronisation) and gather + attention + scatter. The speed-up over dense is in
 * each total row's shape text. One more set for a single whole-prompt chunk of 32K (the paper's
 * case). Section "tsa" of {@code longsieve bench --sparse}.
 */
public final class TsaBench {
  private TsaBench() {}

  static final int CHUNK = 2048;
  static final int WHOLE_PROMPT = 32768;
  static final double[] RATIOS = {0.10, 0.25, 0.50};

  /** Rows for each context (e.g. 32K, 64K, 128K) and the whole-prompt 32K chunk. */
  public static void run(Bench b, ModelConfig c, int[] contexts) {
    int maxL = Math.max(WHOLE_PROMPT, Arrays.stream(contexts).max().orElse(0));
    ModelConfig one = Bench.withLayers(c, 1);
    Kernels k = b.kernels();
    CudaContext ctx = b.ctx();
    int maxRows = Math.max(CHUNK, WHOLE_PROMPT);
    try (PagedKvCache kv = new PagedKvCache(ctx, one, maxL); Kernels.Workspace ws = new Kernels.Workspace(ctx);
         DeviceBuffer q = ctx.alloc((long) maxRows * c.qDim() * 2, "bench q");
         DeviceBuffer out = ctx.alloc((long) maxRows * c.qDim() * 2, "bench out")) {
      Kernels.KvView v = kv.layer(0);
      long cacheElems = (long) kv.pages * c.numKvHeads() * kv.pageSize * c.headDim();
      k.fillRandomBf16(v.kRope(), cacheElems, 14, 1f);
      k.fillRandomBf16(v.v(), cacheElems, 15, 1f);
      k.fillRandomBf16(q.ptr(), (long) maxRows * c.qDim(), 16, 1f);
      GpuEnv env = new GpuEnv(one, ctx, k, ws, null, null);
      for (int L : contexts) {
        if (L > CHUNK) measure(b, env, v, q, out, L, CHUNK, "chunk " + CHUNK + " L=" + L);
      }
      measure(b, env, v, q, out, WHOLE_PROMPT, WHOLE_PROMPT, "whole prompt L=" + WHOLE_PROMPT);
    }
  }

  private static void measure(Bench b, GpuEnv env, Kernels.KvView v, DeviceBuffer q, DeviceBuffer out, int L, int n,
                              String what) {
    ModelConfig c = env.config();
    int heads = c.numHeads(), d = c.headDim(), before = L - n, w = Math.min(128, n), prefix = L - w;
    Kernels k = env.k();
    int reps = L >= 65536 ? 5 : 7;
    double denseMs = b.medianMs(() -> k.attention(out.ptr(), q.ptr(), v, n, heads, before, 0, env.scale(), env.ws()), 1,
        reps);
    double denseFlops = 4.0 * heads * d * ((double) n * before + (double) n * (n + 1) / 2);
    b.add(new Bench.Row("tsa", "dense flash prefill " + what, n + "x" + heads + "x" + d, denseMs,
        denseFlops / denseMs / 1e9, Double.NaN, Double.NaN, Double.NaN));
    LayerCall call = new LayerCall(0, n, before, before, null, c.qDim(), q.ptr(), v, out.ptr());
    try (GpuTsa tsa = new GpuTsa(PolicySpec.parse("tsa:layers=all,window=" + w).prefill(),
        new SelectionStats(1), env)) {
      double proxyFlops = 2.0 * 2 * w * ((double) prefix + L) * heads * d;  // QK^T of both passes
      for (double ratio : RATIOS) {
        int keep = (int) Math.round(ratio * prefix);
        String name = String.format(Locale.ROOT, "TSA keep %d%% %s", Math.round(ratio * 100), what);
        double total = b.medianMs(() -> {
          tsa.proxy(call, w, prefix);
          tsa.select(call, w, prefix, keep);
          tsa.attend(call, w, keep);
        }, 1, reps);
        double proxyMs = b.medianMs(() -> tsa.proxy(call, w, prefix), 1, reps);
        double selectMs = b.medianMs(() -> tsa.select(call, w, prefix, keep), 1, reps);
        double attendMs = b.medianMs(() -> tsa.attend(call, w, keep), 1, reps);
        b.add(new Bench.Row("tsa", name + ": proxy (2 passes, pool, mean)", "window " + w + " x " + L + " keys",
            proxyMs, proxyFlops / proxyMs / 1e9, Double.NaN, Double.NaN, Double.NaN));
        b.add(new Bench.Row("tsa", name + ": selection (cut-off, top-k, 1 sync)", "keep " + keep + " of " + prefix,
            selectMs, Double.NaN, Double.NaN, Double.NaN, Double.NaN));
        b.add(new Bench.Row("tsa", name + ": gather + attention + scatter", "lists of " + (keep + w), attendMs,
            Double.NaN, Double.NaN, Double.NaN, Double.NaN));
        b.add(new Bench.Row("tsa", name + ": total", String.format(Locale.ROOT, "%.2fx vs dense (%.3f ms)",
            denseMs / total, denseMs), total, Double.NaN, Double.NaN, Double.NaN, Double.NaN));
      }
    }
  }
}
