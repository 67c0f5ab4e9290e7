package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.Engine;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.policy.PolicySpec;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The batching engine on the CUDA backend: requests from one caller's list run interleaved (their
 * decode steps alternate on the one stream and share the device token slot), and each gets exactly
 * the tokens it gets alone, dense and sparse policies alike.
 */
@Tag("gpu")
class CudaBatchingTest {

  static final Path MODEL = Path.of("src/test/resources/models/llama-gqa");

  @Test
  void interleavedRequestsGetWhatEachGetsAlone() {
    List<GenerationRequest> reqs = new ArrayList<>();
    String[] policies = {"dense", "tokenselect:sinks=4,k=32,window=32,chunk=64", "selkv:ratio=0.25",
        "streaming:sinks=4,recent=64", "quest:page=8,budget=32,dense_layers=1", "dense"};
    for (int i = 0; i < policies.length; i++) {
      StringBuilder p = new StringBuilder("Note ").append(i).append(':');
      for (int w = 0; w < 60 + 25 * i; w++) p.append(' ').append((char) ('a' + (w * 7 + i) % 26)).append("ay");
      GenerationRequest r = GenerationRequest.raw("r" + i, p.toString(), 12 + 3 * i).withPolicy(PolicySpec.parse(policies[i]));
      if (i % 2 == 1) r = r.withSampling(new SamplingParams(1.2, 0.9, 40 + i));
      reqs.add(r);
    }
    try (Engine e = Backends.open(EngineSpec.of(MODEL).withDevice("cuda"))) {
      assertEquals("cuda", e.backend());
      List<int[]> alone = new ArrayList<>();
      for (GenerationRequest r : reqs) alone.add(e.generate(r).tokenIds());
      long batchedBefore = e.counters().batchedDecodeSteps();
      var together = e.generate(reqs);
      for (int i = 0; i < reqs.size(); i++) {
        assertArrayEquals(alone.get(i), together.get(i).tokenIds(), "request " + i + " (" + policies[i] + ")");
      }
      assertTrue(e.counters().batchedDecodeSteps() > batchedBefore, "decode steps of several requests interleaved");
    }
  }
}
