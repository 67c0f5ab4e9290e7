package io.longsieve.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.policy.PolicySpec;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Fidelity against dense attention ({@link FidelityMeter}, {@link Engine#drive}) on the tiny llama-gqa
 * checkpoint (4 layers, 4 query / 2 KV heads, random weights), a prompt of about 500 tokens in prefill
 * chunks of 96: zero KL, full top-1 agreement and full attention recall wherever the policy attends
 * every key; KL and lost recall where it drops keys; the figures equal a brute-force computation from
 * the logits of the backend's own teacher-forced sequences.
 */
class FidelityMeterTest {

  static Engine engine;
  static GenerationRequest request;
  static DenseReference reference;

  @BeforeAll
  static void open() {
    engine = Backends.open(EngineSpec.of(Goldens.MODELS.resolve("llama-gqa")).withDevice("cpu").withThreads(2)
        .withPrefillChunk(96));
    StringBuilder b = new StringBuilder();
    String[] words = {"river", "stone", "market", "seven", "quietly", "report", "the", "engine", "north", "garden"};
    for (int i = 0; b.length() < 2600; i++) b.append(words[(i * 7 + i / 3) % words.length]).append(i % 11 == 10 ? ". " : " ");
    request = new GenerationRequest("f", b.toString(), null, true, 10, SamplingParams.GREEDY, List.of(), null)
        .withMinNewTokens(10);
    reference = FidelityMeter.reference(engine, request);
  }

  @AfterAll
  static void close() {
    engine.close();
  }

  static Fidelity measure(String policy, int recallPoints) {
    return FidelityMeter.measure(engine, request, PolicySpec.parse(policy), reference, recallPoints);
  }

  @Test
  void recallFollowsALongRopeRecomputePastTheOriginalWindow() {
    // phi3-longrope: original window 64; a 40-token prompt and 40 new tokens cross it, where the CPU runner
    // recomputes the cache with the long factors: recall goes on being recorded on the new cache
    try (Engine e = Backends.open(EngineSpec.of(Goldens.MODELS.resolve("phi3-longrope")).withDevice("cpu")
        .withThreads(2))) {
      GenerationRequest r = new GenerationRequest("l", "river stone market ".repeat(12), null, true, 40,
          SamplingParams.GREEDY, List.of(), null).withMinNewTokens(40);
      DenseReference ref = FidelityMeter.reference(e, r);
      Fidelity f = FidelityMeter.measure(e, r, PolicySpec.DENSE, ref, 3);
      assertEquals(0.0, f.klMean(), 1e-9);
      assertEquals(1.0, f.recallMean(), 1e-9, "dense attends every key, before and after the recompute");
      assertEquals(3, f.recall().decodePositions(), "every probed decode step is recorded, those after the recompute too");
    }
  }

  @Test
  void theDenseReferenceIsDenseGreedyGeneration() {
    GenerationResult g = engine.generate(request.withPolicy(PolicySpec.DENSE));
    int n = reference.steps();
    assertEquals(10, n, "the tiny model writes no end-of-sequence id here: every step compares");
    // generation goes on past an end-of-sequence id only with minNewTokens; the reference stops at the first
    int[] prefix = java.util.Arrays.copyOf(g.tokenIds(), n);
    assertArrayEquals(prefix, reference.tokens());
    assertTrue(reference.promptTokens() > 400, "prompt tokens " + reference.promptTokens());
  }

  @Test
  void denseAgainstItselfIsExact() {
    Fidelity f = measure("dense", 3);
    assertEquals(reference.steps(), f.steps());
    assertEquals(0.0, f.klMean());
    assertEquals(0.0, f.klMax());
    assertEquals(1.0, f.top1Agreement());
    assertEquals(-1, f.firstDivergence());
    assertNotNull(f.recall());
    for (double r : f.recall().byLayer()) assertEquals(1.0, r, 1e-9);
    assertEquals(3, f.recall().prefillPositions());
    assertEquals(Math.min(3, reference.steps() - 1), f.recall().decodePositions());
  }

  @Test
  void policiesWhoseBudgetCoversEveryTokenAreDense() {
    for (String p : new String[] {"tokenselect", "tsa", "quest", "oracle:frac=1", "selkv:ratio=1", "snapkv",
        "streaming", "tokenselect:k_frac=1"}) {
      Fidelity f = measure(p, 2);
      assertEquals(0.0, f.klMean(), 1e-9, p);
      assertEquals(1.0, f.top1Agreement(), p);
      assertEquals(-1, f.firstDivergence(), p);
      assertEquals(1.0, f.recallMean(), 1e-9, p);
    }
  }

  @Test
  void policiesThatDropKeysCostKlAndRecall() {
    for (String p : new String[] {"oracle:k=8", "tokenselect:sinks=4,k=16,window=16,chunk=32", "streaming:sinks=4,recent=16",
        "tsa:tau=0.3,min=16,window=16,layers=all"}) {
      Fidelity f = measure(p, 3);
      assertTrue(f.klMean() > 1e-4, p + " kl " + f.klMean());
      assertTrue(f.klMax() >= f.klMean(), p);
      assertTrue(f.recallMean() < 0.999 && f.recallMean() > 0, p + " recall " + f.recallMean());
    }
  }

  @Test
  void theOracleKeepsMoreAttentionMassThanAWindowOfTheSameSize() {
    // per query 20 keys either way: the window's 4 sinks + 16 recent, or the oracle's top 20 of the true logits
    Fidelity oracle = measure("oracle:k=20", 3);
    Fidelity window = measure("streaming:sinks=4,recent=16", 3);
    assertTrue(oracle.recall().decode() >= window.recall().decode(), oracle.recall() + " vs " + window.recall());
  }

  /** KL, top-1 agreement and first divergence from the logits of two plain teacher-forced runs, written out in full. */
  @Test
  void theFiguresEqualABruteForceComputationFromLogits() {
    String policy = "tokenselect:sinks=4,k=16,window=16,chunk=32";
    Fidelity f = measure(policy, 0);
    List<float[]> dense = forced(PolicySpec.DENSE), sparse = forced(PolicySpec.parse(policy));
    int n = reference.steps();
    double sum = 0, max = 0;
    int agree = 0, first = -1;
    for (int i = 0; i < n; i++) {
      double[] p = softmax(dense.get(i)), q = softmax(sparse.get(i));
      double kl = 0;
      for (int v = 0; v < p.length; v++) if (p[v] > 0) kl += p[v] * Math.log(p[v] / q[v]);
      sum += kl;
      max = Math.max(max, kl);
      if (argmax(q) == argmax(p)) agree++;
      else if (first < 0) first = i;
      assertEquals(reference.tokens()[i], argmax(p));
    }
    assertEquals(sum / n, f.klMean(), 1e-9 + 1e-6 * sum / n);
    assertEquals(max, f.klMax(), 1e-9 + 1e-6 * max);
    assertEquals((double) agree / n, f.top1Agreement());
    assertEquals(first, f.firstDivergence());
    assertTrue(f.klMean() > 0);
  }

  /** Logits of a run fed the reference tokens, through the public drive API with a driver that only records. */
  static List<float[]> forced(PolicySpec p) {
    List<float[]> out = new ArrayList<>();
    engine.drive(request.withPolicy(p).withMaxNewTokens(reference.steps()), (step, logits) -> {
      out.add(logits.clone());
      return step + 1 < reference.steps() ? reference.tokens()[step] : -1;
    }, null);
    return out;
  }

  static double[] softmax(float[] x) {
    double m = Double.NEGATIVE_INFINITY;
    for (float v : x) m = Math.max(m, v);
    double[] e = new double[x.length];
    double z = 0;
    for (int i = 0; i < x.length; i++) z += e[i] = Math.exp(x[i] - m);
    for (int i = 0; i < x.length; i++) e[i] /= z;
    return e;
  }

  static int argmax(double[] p) {
    int best = 0;
    for (int i = 1; i < p.length; i++) if (p[i] > p[best]) best = i;
    return best;
  }

  @Test
  void drivenRunsWaitForRunningRequestsAndLeaveThemUnchanged() throws Exception {
    GenerationRequest g = GenerationRequest.raw("g", "Once upon a time the river", 12).withPolicy(PolicySpec.parse("streaming:sinks=4,recent=8"));
    GenerationResult alone = engine.generate(g);
    ExecutorService pool = Executors.newFixedThreadPool(3);
    try {
      List<Future<GenerationResult>> gens = new ArrayList<>();
      for (int i = 0; i < 2; i++) gens.add(pool.submit(() -> engine.generate(g)));
      Future<Fidelity> fid = pool.submit(() -> measure("oracle:k=8", 0));
      for (Future<GenerationResult> r : gens) assertArrayEquals(alone.tokenIds(), r.get().tokenIds());
      assertEquals(measure("oracle:k=8", 0).klMean(), fid.get().klMean());
    } finally {
      pool.shutdownNow();
    }
  }
}
