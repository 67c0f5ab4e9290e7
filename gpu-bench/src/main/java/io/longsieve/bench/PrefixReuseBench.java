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
 * decode); the engine-level path (the scheduler, the prefix cache) is what {@code CudaPrefixReuseTest}
 * checks for exactness.
 *
 * <p>Two schedules. <b>One after another</b>: each row prefills and decodes alone (an engine of batch 1);
 * every reused row still decodes its tokens alone over the whole cache, which caps N rows near
 * N·(row)/(row + (N−1)·decode). <b>Decoded together</b>, as the engine's scheduler runs a partition's rows:
 * the prefills run one at a time (the scheduler admits one prefill chunk per step), then the N rows
 * decode together, {@link CudaModel#MAX_DECODE_BATCH} per CUDA-graph step ({@link CudaModel#decodeDense}),
 * with and without reuse. That schedule needs N whole caches on the device without reuse; at contexts
 * where they do not fit it is left out and logged.
 */
public final class PrefixReuseBench {
  private PrefixReuseBench() {}

  static final int QUESTION_TOKENS = 32;

  public static void run(Bench b, ModelConfig c, int[] contexts, int chunk, int questions, int decodeSteps) {
    try (CudaWeights w = CudaWeights.synthetic(b.ctx(), b.kernels(), c, 11)) {
      oneAfterAnother(b, c, w, contexts, chunk, questions, decodeSteps);
      for (int L : contexts) together(b, c, w, L, chunk, questions, decodeSteps);
    }
  }

  /** The "one after another" schedule of the class comment at each context. */
  private static void oneAfterAnother(Bench b, ModelConfig c, CudaWeights w, int[] contexts, int chunk, int questions,
                                      int decodeSteps) {
    int maxL = Arrays.stream(contexts).max().orElse(0);
    int capacity = maxL + QUESTION_TOKENS + decodeSteps + 1;
    int perSequence = (capacity + Kernels.PAGE_SIZE - 1) / Kernels.PAGE_SIZE;
    try (CudaModel m = new CudaModel(c, b.ctx(), b.kernelsForOneSequence(), w, chunk);
         KvPagePool pool = new KvPagePool(b.ctx(), c, 2 * perSequence + 1)) {  // a row and the kept prefix
      m.reserveDecode(capacity);
      Random r = new Random(3);
      warmUp(b, m, c, pool, chunk, r);
      for (int L : contexts) {
        List<int[]> prompts = prompts(r, L, questions, c.vocabSize());
        int keep = L / chunk * chunk;  // whole chunks: the fork's chunks are the ones it runs alone
        List<int[]> alone = new ArrayList<>(), reused = new ArrayList<>();
        long t0 = System.nanoTime();
        for (int[] p : prompts) alone.add(row(b, m, c, pool, capacity, p, null, null, 0, decodeSteps));
        double offMs = (System.nanoTime() - t0) / 1e6;
        KeptPages kept = null;
        t0 = System.nanoTime();
        try {
          for (int[] p : prompts) {
            KeptPages[] out = kept == null ? new KeptPages[1] : null;  // the first row keeps the document
            reused.add(row(b, m, c, pool, capacity, p, kept, out, keep, decodeSteps));
            if (out != null) kept = out[0];
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
        b.add(new Bench.Row("prefix", "prefix reuse, " + questions + " questions L=" + L + ", one after another",
            String.format(Locale.ROOT, "%.0f ms without, %.0f with (%d tokens kept); %.2fx", offMs, onMs, keep, offMs / onMs),
            onMs, Double.NaN, Double.NaN, offMs / onMs, Double.NaN));
      }
    }
  }

  /** The "decoded together" schedule of the class comment at context L, when N whole caches fit. */
  private static void together(Bench b, ModelConfig c, CudaWeights w, int L, int chunk, int questions, int decodeSteps) {
    int capacity = L + QUESTION_TOKENS + decodeSteps + 1;
    int perSequence = (capacity + Kernels.PAGE_SIZE - 1) / Kernels.PAGE_SIZE;
    long need = (long) questions * perSequence * KvPagePool.pageBytes(c);
    try (CudaModel m = new CudaModel(c, b.ctx(), b.kernels(), w, chunk)) {
      long free = b.ctx().budgetBytes() - b.ctx().usedBytes() - (4L << 30);  // 4 GiB: decode workspaces
      if (need > free) {
        b.log().printf(Locale.ROOT, "prefix reuse decoded together, L=%d: %d caches need %.1f GiB, %.1f free; left out%n",
            L, questions, need / 1073741824.0, free / 1073741824.0);
        return;
      }
      try (KvPagePool pool = new KvPagePool(b.ctx(), c, questions * perSequence + 1)) {
        m.reserveDecode(capacity);
        m.useDecodeGraphs(true);
        Random r = new Random(3);
        warmUp(b, m, c, pool, chunk, r);
        List<int[]> prompts = prompts(r, L, questions, c.vocabSize());
        int keep = L / chunk * chunk;
        // with reuse first: it pays the decode step's graph captures, which the run without then replays
        long t0 = System.nanoTime();
        int[][] on = decodeTogether(b, m, c, pool, capacity, prompts, true, keep, decodeSteps);
        double onMs = (System.nanoTime() - t0) / 1e6;
        t0 = System.nanoTime();
        int[][] off = decodeTogether(b, m, c, pool, capacity, prompts, false, keep, decodeSteps);
        double offMs = (System.nanoTime() - t0) / 1e6;
        for (int q = 0; q < questions; q++) {
          if (!Arrays.equals(off[q], on[q])) {
            throw new IllegalStateException("row " + q + " at L=" + L + " decoded together: reuse changed its tokens");
          }
        }
        b.add(new Bench.Row("prefix", "prefix reuse, " + questions + " questions L=" + L + ", decoded together",
            String.format(Locale.ROOT, "%.0f ms without, %.0f with (%d tokens kept); %.2fx", offMs, onMs, keep, offMs / onMs),
            onMs, Double.NaN, Double.NaN, offMs / onMs, Double.NaN));
      }
    }
  }

  /**
   * The rows' prefills one at a time (with reuse: the first keeps the document's whole chunks, the others
   * fork them and prefill the rest), then every row decoding together, greedy; returns each row's tokens.
   */
  private static int[][] decodeTogether(Bench b, CudaModel m, ModelConfig c, KvPagePool pool, int capacity,
                                        List<int[]> prompts, boolean reuse, int keep, int steps) {
    int n = prompts.size(), g = CudaModel.MAX_DECODE_BATCH;
    PagedKvCache[] kvs = new PagedKvCache[n];
    KeptPages kept = null;
    int[][] tokens = new int[n][steps];
    try {
      for (int q = 0; q < n; q++) {
        KeptPages[] out = reuse && kept == null ? new KeptPages[1] : null;
        kvs[q] = prefilled(b, m, c, pool, capacity, prompts.get(q), kept, out, keep);
        if (out != null) kept = out[0];
        m.sampleGreedy();
        tokens[q][0] = m.readToken();
      }
      int[] ids = new int[g], pos = new int[g], next = new int[g];
      float[] zero = new float[g], one = new float[g];
      Arrays.fill(one, 1f);  // inverse temperature 0, top-p 1: greedy
      for (int s = 1; s < steps; s++) {
        for (int s0 = 0; s0 < n; s0 += g) {
          int k = Math.min(g, n - s0);
          for (int i = 0; i < k; i++) {
            ids[i] = tokens[s0 + i][s - 1];
            pos[i] = prompts.get(s0 + i).length + s - 1;
          }
          m.decodeDense(ids, pos, Arrays.copyOfRange(kvs, s0, s0 + k), zero, one, zero, k, next);
          for (int i = 0; i < k; i++) tokens[s0 + i][s] = next[i];
        }
      }
      return tokens;
    } finally {
      for (PagedKvCache kv : kvs) if (kv != null) kv.close();
      if (kept != null) kept.close();
    }
  }

  /**
   * One row: its prefilled cache ({@link #prefilled}), then greedy decode; returns the tokens picked.
   */
  private static int[] row(Bench b, CudaModel m, ModelConfig c, KvPagePool pool, int capacity, int[] prompt,
                           KeptPages from, KeptPages[] keepInto, int keep, int steps) {
    try (PagedKvCache kv = prefilled(b, m, c, pool, capacity, prompt, from, keepInto, keep)) {
      int[] tokens = new int[steps];
      m.sampleGreedy();
      tokens[0] = m.readToken();
      for (int s = 1; s < steps; s++) {
        m.decode(tokens[s - 1], true, prompt.length + s - 1, kv, null);
        m.sampleGreedy();
        tokens[s] = m.readToken();
      }
      return tokens;
    }
  }

  /**
   * A row's cache with its prompt prefilled: a fork of {@code from} with the tokens after its first
   * {@code keep} prefilled, when from is not null; else the whole prompt in a new cache, its first keep
   * tokens kept into keepInto[0] on the way when keepInto is not null.
   */
  private static PagedKvCache prefilled(Bench b, CudaModel m, ModelConfig c, KvPagePool pool, int capacity, int[] prompt,
                                        KeptPages from, KeptPages[] keepInto, int keep) {
    PagedKvCache kv = from != null
        ? PagedKvCache.fork(b.ctx(), c, capacity, from, m.kernels().stream()) : new PagedKvCache(b.ctx(), c, capacity, pool);
    try {
      kv.reserve(capacity - kv.length(0));
      if (from != null) {
        m.prefill(Arrays.copyOfRange(prompt, keep, prompt.length), keep, kv, null);
      } else if (keepInto != null) {
        m.prefill(Arrays.copyOf(prompt, keep), 0, kv, null);
        keepInto[0] = kv.keep(keep, m.kernels().stream());
        m.prefill(Arrays.copyOfRange(prompt, keep, prompt.length), keep, kv, null);
      } else {
        m.prefill(prompt, 0, kv, null);
      }
      return kv;
    } catch (RuntimeException e) {
      kv.close();
      throw e;
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

  /** N prompts: one random document of L tokens, then each its own random question of QUESTION_TOKENS. */
  private static List<int[]> prompts(Random r, int L, int questions, int vocab) {
    int[] doc = random(r, L, vocab);
    List<int[]> prompts = new ArrayList<>();
    for (int q = 0; q < questions; q++) {
      int[] p = Arrays.copyOf(doc, L + QUESTION_TOKENS);
      System.arraycopy(random(r, QUESTION_TOKENS, vocab), 0, p, L, QUESTION_TOKENS);
      prompts.add(p);
    }
    return prompts;
  }

  private static int[] random(Random r, int n, int vocab) {
    int[] ids = new int[n];
    for (int i = 0; i < n; i++) ids[i] = r.nextInt(vocab);
    return ids;
  }
}
