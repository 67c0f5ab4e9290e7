package io.longsieve.bench;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.QuestKernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.policy.GpuEnv;
import io.longsieve.cuda.policy.GpuQuest;
import io.longsieve.cuda.policy.GpuStreaming;
import io.longsieve.cuda.policy.LayerCall;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.SelectionStats;
import java.util.Arrays;

/**
 * Decode baselines against dense decode, one layer of the model's shapes on random caches: Quest
 * (page 16, budget 2048; bounds already built, as in steady decoding, plus the one-off bound build
 * after a prefill) and the StreamingLLM window (4 sinks + 2000 recent, compact positions). Rows go
 * to {@code longsieve bench --sparse}. Failure semantics: a part that cannot run here (the list
 * kernel not merged yet) is logged and skipped; CUDA errors propagate.
 */
public final class BaselinesBench {
  private BaselinesBench() {}

  public static void run(Bench b, ModelConfig c, int[] contexts) {
    int maxL = Arrays.stream(contexts).max().orElse(0);
    ModelConfig one = Bench.withLayers(c, 1);
    CudaContext ctx = b.ctx();
    Kernels k = b.kernels();
    int heads = c.numHeads(), d = c.headDim(), qDim = c.qDim();
    float scale = (float) (1.0 / Math.sqrt(d));
    try (PagedKvCache kv = new PagedKvCache(ctx, one, maxL + Kernels.PAGE_SIZE);
         Kernels.Workspace ws = new Kernels.Workspace(ctx);
         DeviceBuffer qBf = ctx.alloc((long) qDim * 2, "bench q bf16");
         DeviceBuffer qPre = ctx.alloc((long) qDim * 4, "bench q f32");
         DeviceBuffer out = ctx.alloc((long) qDim * 2, "bench out");
         DeviceBuffer invFreq = ctx.alloc((long) d / 2 * 4, "bench RoPE frequencies")) {
      Kernels.KvView v = kv.layer(0);
      long cacheElems = (long) kv.pages * c.numKvHeads() * kv.pageSize * d;
      k.fillRandomBf16(v.kPre(), cacheElems, 7, 1f);
      k.fillRandomBf16(v.kRope(), cacheElems, 4, 1f);
      k.fillRandomBf16(v.v(), cacheElems, 5, 1f);
      k.fillRandomBf16(qBf.ptr(), qDim, 6, 1f);
      k.bf16ToF32(qPre.ptr(), qBf.ptr(), qDim);
      invFreq.upload(new Rope(one).inverseFrequencies());
      GpuEnv env = new GpuEnv(one, ctx, k, ws, invFreq.ptr(), null);
      for (int L : contexts) {
        LayerCall call = new LayerCall(0, 1, L - 1, L - 1, qPre.ptr(), qDim, qBf.ptr(), v, out.ptr());
        k.attention(out.ptr(), qBf.ptr(), v, 1, heads, L - 1, 0, scale, ws);  // sizes the workspace
        double dense = b.medianMs(() -> k.attention(out.ptr(), qBf.ptr(), v, 1, heads, L - 1, 0, scale, ws), 3, 15, 20);
        double denseBytes = 2.0 * L * c.kvDim() * 2;
        b.add(new Bench.Row("baselines", "dense decode L=" + L, "1x" + heads + "x1x" + d + " kv " + L, dense, Double.NaN,
            denseBytes / dense / 1e6, denseBytes / dense / 1e6 / b.copyGbps(), Double.NaN));
        quest(b, env, call, L, dense);
        window(b, env, call, L, dense);
      }
    }
  }

  private static void quest(Bench b, GpuEnv env, LayerCall call, int L, double denseMs) {
    ModelConfig c = env.config();
    int page = 16, budget = 2048;
    String policy = "quest:page=" + page + ",budget=" + budget + ",dense_layers=0";
    try (GpuQuest q = new GpuQuest(PolicySpec.parse(policy).decode(), new SelectionStats(1), env)) {
      int full = (L - 1) / page;
      if (GpuQuest.dense(0, 0, q.pick() + 1, full)) return;
      QuestKernels qk = new QuestKernels(env.k());
      q.decode(call);  // builds the bounds of every page and sizes the scratch
      // the one-off build after a prefill, into the part's own buffers' shape
      try (DeviceBuffer mn = env.ctx().alloc((long) full * c.kvDim() * 2, "bench bounds min");
           DeviceBuffer mx = env.ctx().alloc((long) full * c.kvDim() * 2, "bench bounds max")) {
        double ms = b.medianMs(() -> qk.bounds(mn.ptr(), mx.ptr(), call.kv(), page, 0, full), 1, 5);
        double bytes = (double) L * c.kvDim() * 2 + 2.0 * full * c.kvDim() * 2;
        b.add(new Bench.Row("baselines", "quest bounds build (once after prefill) L=" + L, full + " pages of " + page, ms,
            Double.NaN, bytes / ms / 1e6, bytes / ms / 1e6 / b.copyGbps(), Double.NaN));
      }
      double ms = b.medianMs(() -> q.decode(call), 3, 15, 20);
      int len = GpuQuest.listLength(L, page, q.pick());
      // bounds of every page, then each query head's own pages (KV-head sharing only helps through L2)
      double bytes = 2.0 * full * c.kvDim() * 2 + 2.0 * c.numHeads() * len * c.headDim() * 2;
      b.add(new Bench.Row("baselines", String.format("quest decode page=%d budget=%d L=%d (%.1fx dense)", page, budget, L,
          denseMs / ms), "1x" + c.numHeads() + " heads, " + len + " slots each", ms, Double.NaN, bytes / ms / 1e6,
          bytes / ms / 1e6 / b.copyGbps(), Double.NaN));
    }
  }

  private static void window(Bench b, GpuEnv env, LayerCall call, int L, double denseMs) {
    String policy = "streaming:sinks=4,recent=2000";
    try (GpuStreaming.Window w = new GpuStreaming.Window(PolicySpec.parse(policy).decode(), new SelectionStats(1), env)) {
      if (L <= 2004) return;
      w.decode(call);
      double ms = b.medianMs(() -> w.decode(call), 3, 15, 20);
      double bytes = 2.0 * 2004 * env.config().kvDim() * 2;
      b.add(new Bench.Row("baselines", String.format("streaming window decode L=%d (%.1fx dense)", L, denseMs / ms),
          "4 sinks + 2000 recent, compact", ms, Double.NaN, bytes / ms / 1e6, bytes / ms / 1e6 / b.copyGbps(),
          Double.NaN));
    } catch (UnsupportedOperationException e) {
      b.log().println("  baselines | streaming window skipped: " + e.getMessage());
    }
  }
}
