package io.longsieve.bench;

import io.longsieve.cuda.CudaModel;
import io.longsieve.cuda.CudaWeights;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kv.KeptPages;
import io.longsieve.cuda.kv.KvPagePool;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.model.ModelConfig;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * Prefix reuse on the synthetic Llama-3.1-8B (issue 36 §6 on the GPU): N questions over one document of
 * L tokens, each row prefilled and greedily decoded one after the other as an executor's partition runs
 * them, dense attention, against the same rows with the document's KV cache computed once: the first row
 * prefills the document up to its last whole prefill chunk, keeps those pages ({@link PagedKvCache#keep})
 * and goes on; every other row forks them ({@link PagedKvCache#fork}: full pages shared in the page pool,
 * no copy when the prefix ends on a page) and prefills only the rest. Both runs use the same page pool;
 * every row's tokens are checked equal across them. The ratio is end to end over the N rows (prefill and
 * decode), as the engine's scheduler would run them; the engine-level path (the scheduler, the prefix
 * cache) is what {@code CudaPrefixReuseTest} checks for exactness.
 */
public final class PrefixReuseBench {
  private PrefixReuseBench() {}

  static final int QUESTION_TOKENS = 32;

  public static void run(Bench b, ModelConfig c, int[] contexts, int chunk, int questions, int decodeSteps) {
    int maxL = Arrays.stream(contexts).max().orElse(0);
    int capacity = maxL + QUESTION_TOKENS + decodeSteps + 1;
    int perSequence = (capacity + Kernels.PAGE_SIZE - 1) / Kernels.PAGE_SIZE;
    try (CudaWeights w = CudaWeights.synthetic(b.ctx(), b.kernels(), c, 11);
         CudaModel m = new CudaModel(c, b.ctx(), b.kernelsForOneSequence(), w, chunk);
         KvPagePool pool = new KvPagePool(b.ctx(), c, 2 * perSequence + 1)) {  // a row and the kept prefix
      m.reserveDecode(capacity);
      Random r = new Random(3);
      warmUp(b, m, c, pool, chunk, r);
      for (int L : contexts) {
        int[] doc = random(r, L, c.vocabSize());
        List<int[]> prompts = new ArrayList<>();
        for (int q = 0; q < questions; q++) {
          int[] p = Arrays.copyOf(doc, L + QUESTION_TOKENS);
          System.arraycopy(random(r, QUESTION_TOKENS, c.vocabSize()), 0, p, L, QUESTION_TOKENS);
          prompts.add(p);
        }
        int keep = L / chunk * chunk;  // whole chunks: the fork's chunks are the ones it runs alone
        List<int[]> alone = new ArrayList<>(), reused = new ArrayList<>();
        long t0 = System.nanoTime();
        for (int[] p : prompts) alone.add(row(b, m, c, pool, capacity, p, null, 0, decodeSteps));
        double offMs = (System.nanoTime() - t0) / 1e6;
        KeptPages kept = null;
        t0 = System.nanoTime();
        try {
          for (int[] p : prompts) {
            if (kept == null) {
              KeptPages[] out = new KeptPages[1];
              reused.add(row(b, m, c, pool, capacity, p, out, keep, decodeSteps));
              kept = out[0];
            } else {
              reused.add(row(b, m, c, pool, capacity, p, kept, keep, decodeSteps));
            }
          }
        } finally {
          if (kept != null) kept.close();
        }
        double onMs = (System.nanoTime() - t0) / 1e6;
        for (int q = 0; q < questions; q++) {
          if (!Arrays.equals(alone.get(q), reused.get(q))) {
            throw new IllegalStateException("row " + q + " at L=" + L + ": reuse changed its tokens");
          }
        }
        b.add(new Bench.Row("prefix", "prefix reuse, " + questions + " questions L=" + L,
            String.format(Locale.ROOT, "%.0f ms without, %.0f with (%d tokens kept); %.2fx", offMs, onMs, keep, offMs / onMs),
            onMs, Double.NaN, Double.NaN, offMs / onMs, Double.NaN));
      }
    }
  }

  /**
   * One row: prefill (forking {@code kept}, or keeping its first {@code keep} tokens into out[0] when kept is
   * an out array, or plainly), then greedy decode; returns the tokens picked.
   */
  private static int[] row(Bench b, CudaModel m, ModelConfig c, KvPagePool pool, int capacity, int[] prompt, Object kept,
                           int keep, int steps) {
    PagedKvCache kv = kept instanceof KeptPages k
        ? PagedKvCache.fork(b.ctx(), c, capacity, k, m.kernels().stream()) : new PagedKvCache(b.ctx(), c, capacity, pool);
    try {
      kv.reserve(capacity - kv.length(0));
      if (kept instanceof KeptPages) {
        m.prefill(Arrays.copyOfRange(prompt, keep, prompt.length), keep, kv, null);
      } else if (kept instanceof KeptPages[] out) {
        m.prefill(Arrays.copyOf(prompt, keep), 0, kv, null);
        out[0] = kv.keep(keep, m.kernels().stream());
        m.prefill(Arrays.copyOfRange(prompt, keep, prompt.length), keep, kv, null);
      } else {
        m.prefill(prompt, 0, kv, null);
      }
      int[] tokens = new int[steps];
      m.sampleGreedy();
      tokens[0] = m.readToken();
      for (int s = 1; s < steps; s++) {
        m.decode(tokens[s - 1], true, prompt.length + s - 1, kv, null);
        m.sampleGreedy();
        tokens[s] = m.readToken();
      }
      return tokens;
    } finally {
      kv.close();
    }
  }

  private static void warmUp(Bench b, CudaModel m, ModelConfig c, KvPagePool pool, int chunk, Random r) {
    try (PagedKvCache kv = new PagedKvCache(b.ctx(), c, chunk + 1, pool)) {
      kv.reserve(chunk);
      m.prefill(random(r, chunk, c.vocabSize()), 0, kv, null);
      m.sampleGreedy();
      m.readToken();
    }
  }

  private static int[] random(Random r, int n, int vocab) {
    int[] ids = new int[n];
    for (int i = 0; i < n; i++) ids[i] = r.nextInt(vocab);
    return ids;
  }
}
