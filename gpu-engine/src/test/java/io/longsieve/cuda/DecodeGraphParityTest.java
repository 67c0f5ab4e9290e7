package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cuda.kernels.DeviceCaches;
import io.longsieve.cuda.kv.KvPagePool;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.policy.GpuPolicy;
import io.longsieve.model.ModelConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Dense decode steps from CUDA graphs ({@link CudaModel#decodeDense}) give every sequence the bits the
 * eager paths give it: {@link CudaModel#decodeBatch} + {@link CudaModel#pickBatch} for a batch and
 * {@link CudaModel#decode} alone, token for token and logit for logit, over steps that cross page
 * boundaries, for sequences of different lengths in a shared page pool and a private one, greedy and
 * top-p rows in one batch; for the flash-decoding kernels (head dims 64, 128, a sliding window) and the
 * CUDA-core split kernel (head dim 16). Captured graphs must replay each step's plan, not the first's.
 */
@Tag("gpu")
class DecodeGraphParityTest {

  static final int[] PROMPTS = {60, 300, 1020};  // 60 -> 84 and 1020 -> 1044 cross a 64-slot page
  static final int STEPS = 24;

  @ParameterizedTest(name = "head dim {0}, window {1}")
  @CsvSource({"128, 0", "64, 100", "16, 0"})
  void graphStepsGiveTheEagerBits(int headDim, int window) {
    ModelConfig c = DeviceCaches.config(2, 8, 2, headDim, window);
    try (Gpu g = new Gpu(); CudaWeights w = CudaWeights.synthetic(g.ctx, g.k, c, 7);
         CudaModel m = new CudaModel(c, g.ctx, g.k, w, 256)) {
      m.reserveDecode(1100);
      Run eager = run(g, m, c, Path.EAGER);
      Run ungraphed = run(g, m, c, Path.DENSE_NO_GRAPH);
      long replaysBefore = m.graphReplays();
      Run graphed = run(g, m, c, Path.DENSE_GRAPH);
      assertTrue(m.graphReplays() - replaysBefore >= STEPS - 2, "the steps after the first replayed a graph");
      for (Run r : List.of(ungraphed, graphed)) {
        for (int s = 0; s < STEPS; s++) assertArrayEquals(eager.tokens.get(s), r.tokens.get(s), r.path + " step " + s);
        for (int b = 0; b < PROMPTS.length; b++) {
          assertArrayEquals(bits(eager.lastLogits[b]), bits(r.lastLogits[b]), r.path + " logits of row " + b);
        }
      }
      assertEquals(eager.alone, graphed.alone, "a sequence alone, eager decode against one-row graph steps");
    }
  }

  enum Path { EAGER, DENSE_NO_GRAPH, DENSE_GRAPH }

  record Run(Path path, List<int[]> tokens, float[][] lastLogits, List<Integer> alone) {}

  /** The same prompts and sampling through one path: three sequences together, then the longest alone. */
  private static Run run(Gpu g, CudaModel m, ModelConfig c, Path path) {
    m.useDecodeGraphs(path == Path.DENSE_GRAPH);
    int n = PROMPTS.length;
    Random prompts = new Random(3), uniforms = new Random(9);
    int pages = 2 * DeviceCaches.pages(1100, 0);
    try (KvPagePool shared = new KvPagePool(g.ctx, c, pages);
         PagedKvCache a = new PagedKvCache(g.ctx, c, 1100, shared);
         PagedKvCache b = new PagedKvCache(g.ctx, c, 1100, shared);
         PagedKvCache alone = new PagedKvCache(g.ctx, c, 1100)) {
      PagedKvCache[] kvs = {a, b, alone};
      int[] tok = new int[n], pos = new int[n], next = new int[n];
      for (int i = 0; i < n; i++) {
        int[] ids = new int[PROMPTS[i]];
        for (int t = 0; t < ids.length; t++) ids[t] = prompts.nextInt(c.vocabSize());
        m.prefill(ids, 0, kvs[i], null);
        m.sampleGreedy();
        tok[i] = m.readToken();
        pos[i] = PROMPTS[i];
      }
      // row 1 samples top-p, the others greedy
      double[] temp = {0, 0.8, 0}, topP = {1, 0.9, 1};
      float[] invTemp = {0, 1f / 0.8f, 0}, topPf = {1, 0.9f, 1};
      List<int[]> tokens = new ArrayList<>();
      for (int s = 0; s < STEPS; s++) {
        double u1 = uniforms.nextDouble();
        if (path == Path.EAGER) {
          m.decodeBatch(tok, pos, kvs, new GpuPolicy[n], n);
          m.pickBatch(n, temp, topP, new double[] {0, u1, 0}, next);
        } else {
          m.decodeDense(tok, pos, kvs, invTemp, topPf, new float[] {0, (float) u1, 0}, n, next);
        }
        tokens.add(next.clone());
        System.arraycopy(next, 0, tok, 0, n);
        for (int i = 0; i < n; i++) pos[i]++;
      }
      float[][] last = new float[n][];
      for (int i = 0; i < n; i++) last[i] = m.batchLogits(i);
      // the last sequence alone for a few more steps: eager decode of one row against a one-row step
      List<Integer> one = new ArrayList<>();
      int t = tok[2], p = pos[2];
      for (int s = 0; s < 6; s++, p++) {
        if (path == Path.EAGER) {
          m.decode(t, false, p, alone, null);
          m.sampleGreedy();
          t = m.readToken();
        } else {
          int[] pick = new int[1];
          m.decodeDense(new int[] {t}, new int[] {p}, new PagedKvCache[] {alone}, new float[1], new float[] {1},
              new float[1], 1, pick);
          t = pick[0];
        }
        one.add(t);
      }
      return new Run(path, tokens, last, one);
    }
  }

  /** The raw bits of v, for bit-for-bit comparisons (PolicyStepParityTest too). */
  static int[] bits(float[] v) {
    int[] out = new int[v.length];
    for (int i = 0; i < v.length; i++) out[i] = Float.floatToRawIntBits(v[i]);
    return out;
  }
}
