package io.longsieve.cuda;

import io.longsieve.model.ModelConfig;
import java.util.Arrays;
import java.util.Locale;
import java.util.Random;

/**
 * Batched decode on the synthetic Llama-3.1-8B (issue 7 §3 on the GPU): B sequences of L prompt
 * tokens each decode one token per step through {@link CudaModel#decodeBatch} (every weight matrix
 * streamed once per step for all B rows), against B = 1 through the same call. Rows give ms per
 * step and tokens per second over the batch; the ratio is to B = 1 in the same run.
 */
public final class BatchBench {
  private BatchBench() {}

  public static void run(Bench b, ModelConfig c, int promptTokens, int steps, int[] batches) {
    CudaContext ctx = b.ctx();
    Kernels k = b.kernels();
    int maxB = Arrays.stream(batches).max().orElse(1);
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
    } finally {
      for (PagedKvCache kv : kvs) if (kv != null) kv.close();
    }
  }
}
