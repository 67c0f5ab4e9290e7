package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.cpu.CpuRunner;
import io.longsieve.cuda.CudaRunner;
import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.kv.KvAligned;
import io.longsieve.engine.Engine;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.GenerationStats;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.model.Checkpoint;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Issue 5 end to end: every policy combination the GPU runs (prefill dense|tokenselect|tsa × kv
 * none|selkv|snapkv|streaming × decode dense|tokenselect|quest|streaming), scaled to the trained
 * needle model (models/longsieve-needle-7m: 6 layers, head dim 64) so that selection happens on a
 * 200-token prompt of real haystack text — a trained model's attention has clear winners, so bf16
 * rounding rarely swaps a selected token as it does on random weights — on the CPU backend and the
 * CUDA backend: prefill then teacher-forced decode
 * steps (the CPU's greedy tokens fed to both), logits compared per step, greedy tokens compared
 * where the CPU's top-1/top-2 margin is wider than twice that step's largest logit error, and the
 * policy statistics compared at the end (selected fraction per layer, attended-tokens mean, cache
 * hit rate, KV bytes after compression, sparse layers).
 */
@Tag("gpu")
class PolicyEngineParityTest {

  static final Path MODEL = Path.of("..", "models", "longsieve-needle-7m");
  static final Path TEXT = Path.of("..", "examples", "docs.jsonl");
  static final int PROMPT = 200;
  static final int STEPS = 12;

  /** Dense-forward tolerance (ForwardParityTest) for policies whose attended set is fixed by position. */
  static final double POSITIONAL_TOLERANCE = 0.1;
  /**
   * Policies that pick by score may pick differently where two candidates tie within bf16
   * rounding (the GPU scores bf16 keys, the CPU f32); such a swap moves the logits a little more.
   */
  static final double SELECTING_TOLERANCE = 0.2;

  static final String TS = "tokenselect:sinks=4,k=16,window=8,chunk=16";
  static final String[] PREFILL = {"dense", TS, "tsa:tau=0.2,min=32,window=16,layers=all"};
  static final String[] KV = {"none", "selkv:ratio=0.25", "snapkv:capacity=64", "streaming:sinks=4,recent=64"};
  static final String[] DECODE = {"dense", TS, "quest:page=8,budget=32,dense_layers=1", "streaming:sinks=4,recent=32",
      "streaming:sinks=4,recent=32,positions=original"};

  /** TokenSelect scoring with the true logits (score=rope: rotated keys, queries at real positions), both slots. */
  static final String ROPE_SCORED = "prefill=" + TS + ",heads=kvhead,score=rope + kv=none + decode=" + TS
      + ",heads=kvhead,score=rope";

  static LoadedModel model;
  static CpuRunner cpu;
  static ModelRunner gpu;
  static int[] prompt;

  @BeforeAll
  static void open() {
    model = LoadedModel.load(MODEL);
    try (Checkpoint ck = Checkpoint.open(MODEL)) {
      cpu = new CpuRunner(model.config(), ck, 2, 512, MODEL);
    }
    gpu = CudaRunner.open(EngineSpec.of(MODEL).withDevice("cuda"), model);
    String text;
    try {
      text = java.nio.file.Files.readString(TEXT);  // JSONL of haystack documents: text enough for any prompt
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    prompt = java.util.Arrays.copyOf(model.tokenizer().encode(text, false), PROMPT);
  }

  @AfterAll
  static void close() {
    if (gpu != null) gpu.close();
    if (cpu != null) cpu.close();
    if (model != null) model.close();
  }

  static Stream<String> combinations() {
    List<String> all = new ArrayList<>();
    for (String p : PREFILL) for (String k : KV) for (String d : DECODE) all.add("prefill=" + p + " + kv=" + k + " + decode=" + d);
    all.add(ROPE_SCORED);
    return all.stream();
  }

  static boolean selecting(PolicySpec s) {
    return !s.prefill().name().equals("dense") || s.kv().name().equals("selkv") || s.kv().name().equals("snapkv")
        || s.decode().name().equals("tokenselect") || s.decode().name().equals("quest");
  }

  static boolean selectsKv(PolicySpec s) {
    return s.kv().name().equals("selkv") || s.kv().name().equals("snapkv");
  }

  /**
   * Per-step relative logit error within the tolerance. For kv=selkv|snapkv the two runners' keep
   * sets are compared after the prefill (GPU: the recorded keep lists, GpuKvCompress.recordKeep;
   * CPU: KvCache.position of the compacted cache): where every layer and KV head keeps the same
   * tokens, every step's logits must agree to the tolerance of the rest of the policy
   * (POSITIONAL_TOLERANCE unless another part selects); where they differ, the GPU forward's bf16
   * activations moved a score across the cut-off (a near-tie: on random data the same happens from
   * bf16 keys alone, KvKeepModelTest), the decode steps then attend partly different tokens and
   * their logits are not compared: instead each layer and KV head must still keep at least
   * KV_OVERLAP of the CPU's tokens, and the prefill's own logits (before any compression) must agree.
   */
  @ParameterizedTest
  @MethodSource("combinations")
  void gpuFollowsCpu(String policy) {
    PolicySpec spec = PolicySpec.parse(policy);
    assertTrue(GpuPolicy.supported(spec), policy);
    double tol = selecting(spec) ? SELECTING_TOLERANCE : POSITIONAL_TOLERANCE;
    boolean kvSel = selectsKv(spec);
    if (kvSel) {
      tol = !spec.prefill().name().equals("dense") || spec.decode().name().equals("tokenselect")
          || spec.decode().name().equals("quest") ? SELECTING_TOLERANCE : POSITIONAL_TOLERANCE;
    }
    int vocab = model.config().vocabSize();
    float[] gl = new float[vocab], cl = new float[vocab];
    StringBuilder errors = new StringBuilder();
    int compared = 0;
    try (ModelRunner.Sequence gs = gpu.open(PROMPT + STEPS + 1, spec);
         ModelRunner.Sequence cs = cpu.open(PROMPT + STEPS + 1, spec)) {
      GpuKvCompress.keptPositions.clear();
      GpuKvCompress.recordKeep = kvSel;
      try {
        gs.prefill(prompt, gl);
      } finally {
        GpuKvCompress.recordKeep = false;
      }
      cs.prefill(prompt, cl);
      // after the prefill: both resolve TSA's layer list into the description then
      assertEquals(cs.policyResolved(), gs.policyResolved(), "resolved policy");
      String keep = kvSel ? keepOverlap(policy, cs) : null;  // null: the same tokens everywhere
      assertEquals(cs.kvBytesAfterCompression(), gs.kvBytesAfterCompression(), policy + ": KV bytes after compression");
      int swaps = 0;  // decode steps of a scoring decode policy past the tolerance (a near-tie in its top-k)
      boolean tsDecode = spec.decode().name().equals("tokenselect") || spec.decode().name().equals("quest");
      for (int s = 0; s <= STEPS; s++) {
        double err = Gpu.relErr(gl, cl);
        errors.append(String.format(" %.4f", err));
        if (tsDecode && s > 0 && err > tol && err <= TOP_K_SWAP_ERROR && ++swaps <= TOP_K_SWAPS) {
          errors.append("(swap)");
        } else if (keep == null || s == 0) {
          assertTrue(err <= tol, policy + ": step " + s + " logits off by " + err + " (so far:" + errors + ")"
              + (kvSel ? "; the keep sets are equal" : ""));
        }
        double maxAbs = 0;
        for (int i = 0; i < vocab; i++) maxAbs = Math.max(maxAbs, Math.abs(gl[i] - cl[i]));
        int want = Sampler.argmax(cl, vocab);
        if (margin(cl, want) >= 2 * maxAbs) {
          assertEquals(want, Sampler.argmax(gl, vocab), policy + ": greedy token at step " + s);
          compared++;
        }
        if (s == STEPS) break;
        gs.decode(want, PROMPT + s, gl);
        cs.decode(want, PROMPT + s, cl);
      }
      assertStatsEqual(policy, spec, cs.policyStats(), gs.policyStats());
      if (keep != null) errors.append(" (decode steps not compared: ").append(keep).append(')');
    }
    System.out.printf("%s: relative logit error per step%s; greedy tokens compared on %d of %d%n", policy, errors,
        compared, STEPS + 1);
  }

  /**
   * TokenSelect's decode picks 16 keys per step by score (Quest: pages by their score bound, the same case); the GPU scores bf16 keys, the CPU f32, so
   * at a near-tie one key can swap. On the trained model, whose attention is peaked, one swapped key
   * moves that step's logits well past SELECTING_TOLERANCE (0.24 at step 1 and 0.63 at step 7 of two
   * combinations on the H200, the steps before within 0.01; Quest 0.23 at step 7 after TSA's prefill); the cache is the same for the next step,
   * so the swap does not carry over. Up to TOP_K_SWAPS decode
   * steps may land between the tolerance and TOP_K_SWAP_ERROR; every other step is held to the
   * tolerance, and the statistics must still agree.
   */
  static final int TOP_K_SWAPS = 2;
  static final double TOP_K_SWAP_ERROR = 1.0;

  /**
   * Least share of the CPU's kept tokens the GPU keeps per layer and KV head when the sets differ:
   * the selection picks 14 (SelKV) or 32 (SnapKV) of ~165 scored tokens here; the rest (sinks,
   * window) is fixed, so this allows about a third of the scored picks to swap at near-ties.
   */
  static final double KV_OVERLAP = 0.9;

  /**
   * Compares the keep sets after the prefill; null when equal in every layer and KV head, else a
   * summary of the differing ones (each asserted to overlap by at least KV_OVERLAP).
   */
  static String keepOverlap(String policy, ModelRunner.Sequence cs) {
    io.longsieve.cpu.kernels.KvCache kv;
    try {
      java.lang.reflect.Field f = cs.getClass().getDeclaredField("kv");  // CpuRunner's sequence holds its cache
      f.setAccessible(true);
      kv = (io.longsieve.cpu.kernels.KvCache) f.get(cs);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError("the CPU sequence's KvCache", e);
    }
    StringBuilder diff = new StringBuilder();
    for (int l = 0; l < kv.layers; l++) {
      int[][] gpuKeep = GpuKvCompress.keptPositions.get(l);
      for (int g = 0; g < kv.nKvHeads(); g++) {
        int[] cpuPos = KvAligned.cpuPositions(kv, l, g);
        int[] gpuPos = gpuKeep == null ? java.util.stream.IntStream.range(0, PROMPT).toArray() : gpuKeep[g];
        java.util.Set<Integer> cpuSet = new java.util.HashSet<>();
        for (int p : cpuPos) cpuSet.add(p);
        int common = 0;
        for (int p : gpuPos) if (cpuSet.contains(p)) common++;
        if (common == cpuPos.length && gpuPos.length == cpuPos.length) continue;
        double overlap = common / (double) Math.max(cpuPos.length, gpuPos.length);
        diff.append(String.format("layer %d KV head %d keeps %d of %d alike; ", l, g, common, cpuPos.length));
        assertTrue(overlap >= KV_OVERLAP, policy + ": " + diff);
      }
    }
    return diff.length() == 0 ? null : diff.toString().trim();
  }

  /** Top-1 minus top-2 logit. */
  static double margin(float[] l, int top) {
    float second = Float.NEGATIVE_INFINITY;
    for (int i = 0; i < l.length; i++) if (i != top) second = Math.max(second, l[i]);
    return l[top] - second;
  }

  static void assertStatsEqual(String policy, PolicySpec spec, PolicyStats c, PolicyStats g) {
    assertEquals(c.kvBytesAfter(), g.kvBytesAfter(), policy + ": kvBytesAfter");
    assertEquals(c.sparseLayers(), g.sparseLayers(), policy + ": sparse layers");
    // decode attends a count fixed by lengths and budgets, never by scores
    assertEquals(c.attendedTokensMean(), g.attendedTokensMean(), 1e-9 * c.attendedTokensMean(),
        policy + ": attended tokens mean");
    float[] cf = c.selectedFractionByLayer(), gf = g.selectedFractionByLayer();
    assertEquals(cf.length, gf.length, policy + ": layers");
    // TSA keeps the tokens covering a share of attention mass: a count that bf16 scores may move by a token or two
    double fracTol = spec.prefill().name().equals("tsa") ? 0.02 : 1e-6;
    for (int l = 0; l < cf.length; l++) {
      assertEquals(cf[l], gf[l], fracTol, policy + ": selected fraction of layer " + l);
    }
    if (Double.isNaN(c.selectionCacheHitRate())) {
      assertTrue(Double.isNaN(g.selectionCacheHitRate()), policy + ": cache hit rate " + g.selectionCacheHitRate());
    } else {
      // a hit is a cosine above 0.9 between queries: bf16 queries may flip a few lookups at the threshold
      assertEquals(c.selectionCacheHitRate(), g.selectionCacheHitRate(), 0.1, policy + ": cache hit rate");
    }
  }

  /**
   * The same combinations through the public Engine API on both devices: every one runs on each,
   * reports its backend and the same canonical policy and KV bytes, and generates (up to EOS).
   */
  @Test
  void everyCombinationRunsThroughBothEngines() {
    try (Engine c = Backends.open(EngineSpec.of(MODEL).withDevice("cpu").withThreads(2));
         Engine g = Backends.open(EngineSpec.of(MODEL).withDevice("cuda"))) {
      assertEquals("cpu", c.backend());
      assertEquals("cuda", g.backend());
      StringBuilder text = new StringBuilder();
      for (int i = 0; text.length() < 900; i++) text.append("word").append(i % 37).append(i % 9 == 8 ? ". " : " ");
      for (String policy : combinations().toList()) {
        GenerationResult cr = run(c, text.toString(), policy), gr = run(g, text.toString(), policy);
        assertEquals("cuda", gr.stats().backend(), policy);
        assertEquals(cr.stats().policy(), gr.stats().policy(), policy);
        assertTrue(gr.tokenIds().length >= 1 && gr.tokenIds().length <= 4, policy + ": tokens (EOS may stop early)");
        assertEquals(cr.stats().policyStats().kvBytesAfter(), gr.stats().policyStats().kvBytesAfter(), policy + ": kvBytesAfter");
        assertArrayEquals(new int[] {cr.stats().policyStats().selectedFractionByLayer().length},
            new int[] {gr.stats().policyStats().selectedFractionByLayer().length}, policy);
      }
    }
  }

  /**
   * attention_ms and selection_ms mean the same on both engines (docs/outputs.md, stats table): both inside
   * the prefill, selection 0 for a dense prefill, and the GPU's selection in device time (a host
   * clock around TSA's synchronising cut-off counted the queued GEMMs: most of the prefill).
   */
  @Test
  void attentionAndSelectionTimesMeanTheSameOnBothEngines() {
    try (Engine c = Backends.open(EngineSpec.of(MODEL).withDevice("cpu").withThreads(2));
         Engine g = Backends.open(EngineSpec.of(MODEL).withDevice("cuda"))) {
      StringBuilder text = new StringBuilder();
      for (int i = 0; text.length() < 900; i++) text.append("word").append(i % 37).append(i % 9 == 8 ? ". " : " ");
      for (String policy : PREFILL) {
        for (Engine e : List.of(c, g)) {
          GenerationStats s = run(e, text.toString(), policy).stats();
          String what = e.backend() + " " + policy + ": " + s;
          assertTrue(s.attentionMs() >= 0 && s.policyStats().selectionMs() >= 0, what);
          assertTrue(s.attentionMs() + s.policyStats().selectionMs() <= s.prefillMs(), what);
          if (policy.equals("dense")) assertEquals(0.0, s.policyStats().selectionMs(), what);
          if (s.policyStats().sparseLayers() > 0) assertTrue(s.policyStats().selectionMs() > 0, what);
        }
      }
    }
  }

  static GenerationResult run(Engine e, String text, String policy) {
    return e.generate(new GenerationRequest("p", text, null, true, 4, SamplingParams.GREEDY, List.of(),
        PolicySpec.parse(policy)));
  }
}
