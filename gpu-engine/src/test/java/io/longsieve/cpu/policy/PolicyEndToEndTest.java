package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.Engine;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.GenerationStats;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Every policy through {@link Engine} on the tiny llama-gqa checkpoint (4 layers, 4 query / 2 KV
 * heads): with budgets that cover the prompt the generated tokens equal dense attention's; with
 * small budgets each policy runs, is sparse where it should be, and reports its statistics.
 */
class PolicyEndToEndTest {

  static final Path MODEL = Path.of("src/test/resources/models/llama-gqa");
  static Engine engine;
  static String prompt;

  @BeforeAll
  static void open() {
    engine = Backends.open(EngineSpec.of(MODEL).withDevice("cpu").withThreads(2).withPrefillChunk(96));
    StringBuilder b = new StringBuilder();
    String[] words = {"river", "stone", "market", "seven", "quietly", "report", "the", "engine", "north", "garden"};
    for (int i = 0; b.length() < 2600; i++) b.append(words[(i * 7 + i / 3) % words.length]).append(i % 11 == 10 ? ". " : " ");
    prompt = b.toString();
  }

  @AfterAll
  static void close() {
    engine.close();
  }

  static GenerationResult run(String policy, int maxNew) {
    return engine.generate(new GenerationRequest("t", prompt, null, true, maxNew, SamplingParams.GREEDY, List.of(),
        PolicySpec.parse(policy)));
  }

  @Test
  void fullBudgetPoliciesGenerateTheDenseTokens() {
    GenerationResult dense = run("dense", 12);
    assertTrue(dense.stats().inputTokens() > 400, "prompt tokens " + dense.stats().inputTokens());
    for (String p : new String[] {"tokenselect", "tsa", "tsa:tau=0", "selkv:ratio=1", "snapkv", "h2o:heavy=0.5,recent=0.5",
        "streaming", "quest", "tsa + selkv:ratio=1 + tokenselect", "tokenselect:k_frac=1"}) {
      GenerationResult r = run(p, 12);
      assertArrayEquals(dense.tokenIds(), r.tokenIds(), p);
      assertEquals(PolicySpec.parse(p).canonical(), r.stats().policy());
      assertEquals(PolicySpec.parse(p).canonical().replace("layers=auto", "layers=auto-unprofiled(2-3)"),
          r.stats().policyResolved());
    }
  }

  @Test
  void denseReportsFullAttention() {
    GenerationStats s = run("dense", 6).stats();
    assertEquals("dense", s.policy());
    assertEquals(4, s.policyStats().selectedFractionByLayer().length);
    for (float f : s.policyStats().selectedFractionByLayer()) assertEquals(1f, f, 1e-6);
    assertEquals(s.inputTokens() + 3, s.policyStats().attendedTokensMean(), 1e-9); // 5 decode steps see n+1 .. n+5 tokens
    assertEquals(s.kvBytesBefore(), s.policyStats().kvBytesAfter());
    assertTrue(Double.isNaN(s.policyStats().selectionCacheHitRate()));
  }

  @Test
  void sparsePoliciesRunAndReportTheirStats() {
    String ts = "tokenselect:sinks=4,k=32,window=32,chunk=64";
    String tsa = "tsa:tau=0.2,min=32,window=16,layers=all";
    for (String p : new String[] {ts, ts + ",heads=kvhead,gqa=mod,pool=3,positions=original,cache=on", tsa,
        "selkv:ratio=0.25", "selkv:ratio=0.25,merge=kv", "snapkv:capacity=64", "h2o", "streaming:sinks=4,recent=64",
        "quest:budget=64,page=8,dense_layers=1", tsa + " + selkv:ratio=0.25 + " + ts}) {
      GenerationResult r = run(p, 8);
      GenerationStats s = r.stats();
      assertEquals(8, r.tokenIds().length, p);
      PolicySpec spec = PolicySpec.parse(p);
      float[] frac = s.policyStats().selectedFractionByLayer();
      assertEquals(4, frac.length, p);
      double meanFrac = 0;
      for (float f : frac) {
        assertTrue(f > 0 && f <= 1.0000001, p + " fraction " + f);
        meanFrac += f / 4;
      }
      boolean compresses = !spec.kv().name().equals("none");
      if (compresses) assertTrue(s.policyStats().kvBytesAfter() < s.kvBytesBefore(), p + " kv " + s.kvBytesBefore() + " -> " + s.policyStats().kvBytesAfter());
      else assertEquals(s.kvBytesBefore(), s.policyStats().kvBytesAfter(), p);
      boolean attendsLess = compresses || !spec.prefill().name().equals("dense") || !spec.decode().name().equals("dense");
      if (attendsLess) assertTrue(meanFrac < 1, p + " mean fraction " + meanFrac);
      assertTrue(s.policyStats().attendedTokensMean() > 0 && s.policyStats().attendedTokensMean() < s.inputTokens() + 8, p);
      assertEquals(spec.prefill().name().equals("tsa") ? 4 : 0, s.policyStats().sparseLayers(), p);
      if (p.startsWith(ts) && p.contains("cache=on")) {
        assertTrue(s.policyStats().selectionCacheHitRate() >= 0 && s.policyStats().selectionCacheHitRate() <= 1, p);
      } else if (p.startsWith(ts)) {
        assertTrue(Double.isNaN(s.policyStats().selectionCacheHitRate()), p + ": the cache is off by default");
      }
      assertTrue(s.policyStats().selectionMs() >= 0 && s.attentionMs() >= 0, p);
    }
  }
}
