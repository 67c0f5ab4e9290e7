package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.cpu.policy.AttentionContext;
import io.longsieve.cpu.policy.TokenSelectProbe;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.model.RopeScaling;
import io.longsieve.policy.TokenSelectParams;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The GPU part's block sizes (runs without a GPU): dense or sparse, and the list length, equal
 * what the CPU TokenSelect does on the same call, so the device never has to report them.
 */
class GpuTokenSelectPlanTest {

  @ParameterizedTest(name = "{0} len={1} m={2}")
  @CsvSource({"'sinks=4,k=12,window=8', 97, 1", "'sinks=4,k=12,window=8', 24, 1", "'sinks=4,k=12,window=8', 25, 1",
      "'sinks=4,k=12,window=8,k_frac=0.1', 200, 1", "'sinks=2,k=10,window=6,chunk=16', 60, 16",
      "'sinks=2,k=10,window=6,chunk=16', 60, 40", "'sinks=0,k=1,window=0', 30, 1"})
  void listLengthsMatchTheCpu(String params, int len, int m) {
    ModelConfig c = new ModelConfig("llama", 32, 16, 1, 4, 2, 8, 32, 1e-5, 10000.0, RopeScaling.NONE, 1 << 16, false,
        false, 0, -1, List.of());
    Rope rope = new Rope(c);
    try (ThreadPool pool = new ThreadPool(1)) {
      AttentionContext ctx = new AttentionContext(c, rope, pool);
      Random r = new Random(len * 31L + m);
      KvCache kv = new KvCache(c, rope, len);
      float[] k = new float[len * c.kvDim()], v = new float[len * c.kvDim()], q = new float[m * c.qDim()];
      for (int i = 0; i < k.length; i++) k[i] = (float) r.nextGaussian();
      for (int i = 0; i < v.length; i++) v[i] = (float) r.nextGaussian();
      for (int i = 0; i < q.length; i++) q[i] = (float) r.nextGaussian();
      kv.append(0, k, 0, v, 0, len, 0);
      TokenSelectProbe cpu = new TokenSelectProbe(params + ",cache=off", ctx);
      float[] out = new float[m * c.qDim()];
      if (m == 1) cpu.decode(0, q, len - 1, kv, out);
      else cpu.prefill(0, q, m, len - m, kv, out);
      var t = io.longsieve.policy.PolicySpec.parse("prefill=tokenselect:" + params).prefill();
      int chunk = t.intParam("chunk"), lastM = m == 1 ? 1 : (m - 1) % chunk + 1; // the CPU keeps the last sub-chunk's lists
      TokenSelectParams.Block p = TokenSelectParams.of(t).block(len, lastM);
      if (p.dense()) {
        assertEquals(len, p.listLen());
      } else {
        assertEquals(cpu.listLen(), p.listLen(), "list length");
        assertEquals(cpu.lists().length, p.listLen(), "one list");
      }
    }
  }

  /**
   * Decode with index=int4: the copy quantised lazily (GpuTokenSelect.index) always covers the slots
   * the scoring reads, [0, sinks + cands), yet launches about once per local window, not every step.
   */
  @ParameterizedTest(name = "sinks={0} k={1} window={2} k_frac={3}")
  // the last is dense until slot 5013, then sparse
  @CsvSource({"128, 2048, 512, 0.0", "4, 12, 8, 0.0", "4, 12, 8, 0.1", "0, 1, 0, 0.0", "4, 5000, 8, 0.0"})
  void int4CopyCoversTheScoredSlotsWithFewLaunches(int sinks, int k, int window, double kFrac) {
    int prefill = 3000, steps = 4000, indexed = prefill, launches = 0; // prefill quantises every slot
    for (int end = prefill + 1; end <= prefill + steps; end++) {
      TokenSelectParams.Block p = new TokenSelectParams(sinks, k, kFrac, window, 512, false, false, 0, true, false,
          true, 0.9, true, false).block(end, 1);
      assertEquals(p.dense() ? 0 : sinks + p.cands(), p.scoredEnd(), "scored slots at " + end);
      int from = GpuTokenSelect.quantiseFrom(indexed, p.scoredEnd());
      if (p.dense()) assertEquals(-1, from, "a dense step reads no copy");
      if (from >= 0) {
        assertEquals(indexed, from, "continues where the copy ends");
        indexed = end; // the launch quantises every slot up to the call's last
        launches++;
      }
      assertTrue(indexed >= p.scoredEnd() && indexed <= end, "copy [0, " + indexed + ") at " + end);
    }
    int local = Math.max(window, 1);
    assertTrue(launches <= steps / local + 1, launches + " launches in " + steps + " steps");
  }

  /**
   * score=rope runs on the GPU; with index=int4 (a copy of the pre-RoPE keys) the parameters both parts
   * read refuse it, so the GPU part fails as the CPU twin does, with the same exception and message.
   */
  @Test
  void ropeScoreIsAcceptedExceptWithTheInt4Index() {
    for (String ok : new String[] {"score=rope", "score=rope,heads=kvhead,gqa=mod", "score=rope,positions=original",
        "score=neutral,index=int4"}) {
      assertDoesNotThrow(() -> params(ok), ok);
    }
    IllegalArgumentException gpuErr = assertThrows(IllegalArgumentException.class,
        () -> params("score=rope,index=int4"));
    ModelConfig c = new ModelConfig("llama", 32, 16, 1, 4, 2, 8, 32, 1e-5, 10000.0, RopeScaling.NONE, 1 << 16, false,
        false, 0, -1, List.of());
    try (ThreadPool pool = new ThreadPool(1)) {
      AttentionContext ctx = new AttentionContext(c, new Rope(c), pool);
      IllegalArgumentException cpuErr = assertThrows(IllegalArgumentException.class,
          () -> new TokenSelectProbe("score=rope,index=int4", ctx));
      assertEquals(cpuErr.getMessage(), gpuErr.getMessage());
    }
  }

  private static TokenSelectParams params(String p) {
    return TokenSelectParams.of(io.longsieve.policy.PolicySpec.parse("prefill=tokenselect:" + p).prefill());
  }

  @Test
  void quantiseFromLaunchesOnlyForMissingSlots() {
    assertEquals(-1, GpuTokenSelect.quantiseFrom(100, 100));
    assertEquals(-1, GpuTokenSelect.quantiseFrom(100, 0));
    assertEquals(100, GpuTokenSelect.quantiseFrom(100, 101));
    assertEquals(0, GpuTokenSelect.quantiseFrom(0, 1));
  }
}
