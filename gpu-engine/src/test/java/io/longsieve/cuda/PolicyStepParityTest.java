package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cuda.kernels.DeviceCaches;
import io.longsieve.cuda.kv.KvPagePool;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.policy.GpuPolicy;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Sparse decode steps through {@link CudaModel#decodeStep}, replayed from CUDA graphs, give every
 * sequence the bits the eager path gives it ({@link CudaModel#decodeBatch} with the policy's own
 * {@code decode}, then {@link CudaModel#pickBatch}): tokens and logits, and the same statistics
 * (attended keys, Selection Cache hits). The steps cross the dense/sparse boundary of the shortest
 * prompt, page boundaries, TokenSelect's int4 copy extension and Quest's filled pages; the batch
 * mixes a dense row with policy rows, greedy and top-p. TokenSelect: one variant per option family
 * (cache on/off, always hitting, int4, max-pool with per-KV-head lists and original positions,
 * k_frac with score=rope); StreamingLLM's window; Quest.
 */
@Tag("gpu")
class PolicyStepParityTest {

  // 60 + sinks 4 + k 48 + window 32 (TokenSelect), 4 + 64 (the window): dense, then sparse; Quest: dense throughout
  static final int[] PROMPTS = {60, 300, 700, 1000};
  static final int STEPS = 40;

  @ParameterizedTest(name = "{0}, head dim {1}")
  @CsvSource(delimiter = '|', value = {
      "tokenselect:sinks=4,k=48,window=32,cache=on | 128",
      "tokenselect:sinks=4,k=48,window=32,cache=on,threshold=-2 | 64",
      "tokenselect:sinks=4,k=48,window=32,cache=off | 128",
      "tokenselect:sinks=4,k=48,window=32,index=int4 | 128",
      "tokenselect:sinks=4,k=40,window=16,pool=3,heads=kvhead,positions=original | 64",
      "tokenselect:sinks=4,k_frac=0.1,window=32,score=rope,scale=sqrt | 128",
      "decode=streaming:sinks=4,recent=64 | 128",
      "decode=streaming:sinks=4,recent=64,positions=original | 64",
      "decode=quest:page=32,budget=128,dense_layers=1 | 128"})
  void capturedStepsGiveTheEagerBits(String policy, int headDim) {
    ModelConfig c = DeviceCaches.config(2, 8, 2, headDim, 0);
    PolicySpec spec = PolicySpec.parse(policy);
    try (Gpu g = new Gpu(); CudaWeights w = CudaWeights.synthetic(g.ctx, g.k, c, 11);
         CudaModel m = new CudaModel(c, g.ctx, g.k, w, 256)) {
      m.reserveDecode(1100);
      Run eager = run(g, m, c, spec, false);
      long replaysBefore = m.graphReplays();
      Run stepped = run(g, m, c, spec, true);
      assertTrue(m.graphReplays() - replaysBefore >= STEPS / 2, "most steps replayed a graph: "
          + (m.graphReplays() - replaysBefore));
      for (int s = 0; s < STEPS; s++) assertArrayEquals(eager.tokens.get(s), stepped.tokens.get(s), "step " + s);
      for (int b = 0; b < PROMPTS.length; b++) {
        assertArrayEquals(DecodeGraphParityTest.bits(eager.lastLogits[b]),
            DecodeGraphParityTest.bits(stepped.lastLogits[b]), "logits of row " + b);
        PolicyStats e = eager.stats[b], s = stepped.stats[b];
        assertEquals(e.attendedTokensMean(), s.attendedTokensMean(), "attended keys of row " + b);
        assertEquals(e.selectionCacheHitRate(), s.selectionCacheHitRate(), "cache hit rate of row " + b);
        assertArrayEquals(e.selectedFractionByLayer(), s.selectedFractionByLayer(), "selected fractions of row " + b);
      }
      assertEquals(eager.alone, stepped.alone, "a sequence alone: eager decode against one-row steps");
    }
  }

  record Run(List<int[]> tokens, float[][] lastLogits, PolicyStats[] stats, List<Integer> alone) {}

  /** Rows 0, 2, 3 decode through the policy, row 1 densely; then row 3's sequence goes on alone. */
  private static Run run(Gpu g, CudaModel m, ModelConfig c, PolicySpec spec, boolean stepped) {
    m.useDecodeGraphs(stepped);
    int n = PROMPTS.length;
    Random prompts = new Random(5), uniforms = new Random(13);
    GpuPolicy[] policies = new GpuPolicy[n];
    try (KvPagePool shared = new KvPagePool(g.ctx, c, 3 * DeviceCaches.pages(1100, 0));
         PagedKvCache a = new PagedKvCache(g.ctx, c, 1100, shared);
         PagedKvCache b = new PagedKvCache(g.ctx, c, 1100, shared);
         PagedKvCache d = new PagedKvCache(g.ctx, c, 1100, shared);
         PagedKvCache alone = new PagedKvCache(g.ctx, c, 1100)) {
      PagedKvCache[] kvs = {a, b, d, alone};
      for (int i = 0; i < n; i++) policies[i] = GpuPolicy.open(i == 1 ? PolicySpec.DENSE : spec, m.env(null));
      int[] tok = new int[n], pos = new int[n], next = new int[n];
      for (int i = 0; i < n; i++) {
        int[] ids = new int[PROMPTS[i]];
        for (int t = 0; t < ids.length; t++) ids[t] = prompts.nextInt(c.vocabSize());
        m.prefill(ids, 0, kvs[i], policies[i]);
        policies[i].afterPrefill(kvs[i]);
        m.sampleGreedy();
        tok[i] = m.readToken();
        pos[i] = PROMPTS[i];
      }
      // row 2 samples top-p, the others greedy
      double[] temp = {0, 0, 0.8, 0}, topP = {1, 1, 0.9, 1};
      float[] invTemp = {0, 0, 1f / 0.8f, 0}, topPf = {1, 1, 0.9f, 1};
      List<int[]> tokens = new ArrayList<>();
      for (int s = 0; s < STEPS; s++) {
        double u2 = uniforms.nextDouble();
        if (!stepped) {
          m.decodeBatch(tok, pos, kvs, policies, n);
          m.pickBatch(n, temp, topP, new double[] {0, 0, u2, 0}, next);  // the dense row counts itself here
        } else {
          int before = kvs[1].length(0);
          m.decodeStep(tok, pos, kvs, policies, invTemp, topPf, new float[] {0, 0, (float) u2, 0}, n, next);
          policies[1].countDenseDecode(before, pos[1]);  // as decodeStep's callers count its dense rows
        }
        tokens.add(next.clone());
        System.arraycopy(next, 0, tok, 0, n);
        for (int i = 0; i < n; i++) pos[i]++;
      }
      float[][] last = new float[n][];
      for (int i = 0; i < n; i++) last[i] = m.batchLogits(i);
      List<Integer> one = new ArrayList<>();
      int t = tok[3], p = pos[3];
      for (int s = 0; s < 8; s++, p++) {
        if (!stepped) {
          m.decode(t, false, p, alone, policies[3]);
          m.sampleGreedy();
          t = m.readToken();
        } else {
          int[] pick = new int[1];
          m.decodeStep(new int[] {t}, new int[] {p}, new PagedKvCache[] {alone}, new GpuPolicy[] {policies[3]},
              new float[1], new float[] {1}, new float[1], 1, pick);
          t = pick[0];
        }
        one.add(t);
      }
      PolicyStats[] stats = new PolicyStats[n];
      for (int i = 0; i < n; i++) stats[i] = policies[i].stats();
      return new Run(tokens, last, stats, one);
    } finally {
      for (GpuPolicy p : policies) if (p != null) p.close();
    }
  }
}
