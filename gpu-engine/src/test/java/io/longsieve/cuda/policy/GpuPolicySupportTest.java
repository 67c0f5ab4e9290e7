package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.Engine;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.Goldens;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.policy.PolicySpec;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Which policies the CUDA backend accepts, and device auto's fallback to the CPU for the rest (no GPU needed). */
class GpuPolicySupportTest {

  @Test
  void everyGpuSlotCombinationIsAccepted() {
    for (String p : new String[] {"dense", "tokenselect", "tsa"}) {
      for (String k : new String[] {"none", "selkv", "snapkv", "streaming"}) {
        for (String d : new String[] {"dense", "tokenselect", "quest", "streaming"}) {
          String policy = "prefill=" + p + " + kv=" + k + " + decode=" + d;
          assertNull(GpuPolicy.unsupportedReason(PolicySpec.parse(policy)), policy);
          assertTrue(GpuPolicy.supported(PolicySpec.parse(policy)), policy);
        }
      }
    }
    for (String shorthand : new String[] {"dense", "tokenselect", "streaming", "quest", "tsa", "selkv", "snapkv",
        "tsa + selkv:ratio=0.25 + tokenselect:k=2048", "streaming:positions=original",
        "tokenselect:k_frac=0.1,heads=kvhead,score=rope"}) {
      assertTrue(GpuPolicy.supported(PolicySpec.parse(shorthand)), shorthand);
    }
  }

  @Test
  void h2oIsRefusedWithTheSlotNamed() {
    assertEquals("KV policy 'h2o'", GpuPolicy.unsupportedReason(PolicySpec.parse("h2o")));
    assertEquals("KV policy 'h2o'", GpuPolicy.unsupportedReason(PolicySpec.parse("tokenselect + h2o + quest")));
    assertFalse(GpuPolicy.supported(PolicySpec.parse("h2o:heavy=0.2,recent=0.2")));
  }

  @Test
  void cpuOnlyDiagnosticsAreRefusedWithTheOptionNamed() {
    // TokenSelect's score=rope has a GPU part (GpuTokenSelect); SelKV's merge gate does not
    assertNull(GpuPolicy.unsupportedReason(PolicySpec.parse("decode=tokenselect:k_frac=0.1,score=rope")));
    assertEquals("selkv gate=0.9 (a CPU-only diagnostic)",
        GpuPolicy.unsupportedReason(PolicySpec.parse("selkv:pool=5,gate=0.9")));
    assertTrue(GpuPolicy.supported(PolicySpec.parse("tokenselect:score=neutral + selkv:gate=0")));
  }

  /** h2o as the engine's default policy: device auto opens the CPU backend, whether or not a GPU is present. */
  @Test
  void autoDeviceWithH2oDefaultRunsOnCpu() {
    try (Engine e = Backends.open(EngineSpec.of(Goldens.MODELS.resolve("llama-gqa")).withThreads(2)
        .withDefaultPolicy(PolicySpec.parse("h2o")))) {
      assertEquals("cpu", e.backend());
      GenerationResult r = e.generate(new GenerationRequest("h", "The cat sat on the mat.", null, true, 3,
          SamplingParams.GREEDY, List.of(), null));
      assertEquals("cpu", r.stats().backend());
      assertTrue(r.stats().policy().startsWith("dense + h2o"), r.stats().policy());
    }
  }
}
