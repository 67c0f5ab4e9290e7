package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.Engine;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.GenerationTimeoutException;
import io.longsieve.engine.spi.RequestLimits;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The CPU engine honours the per-request limits the job's retry and timeout rules rely on. */
class RequestLimitsEngineTest {

  static Engine engine;

  @BeforeAll
  static void open() {
    engine = Backends.open(EngineSpec.of(JobTestSupport.MODEL).withDevice("cpu").withThreads(1).withPrefillChunk(64));
  }

  @AfterAll
  static void close() {
    engine.close();
  }

  @Test
  void smallerPrefillChunksGiveTheSameGreedyTokens() {
    GenerationRequest r = GenerationRequest.chat("d", String.join(" ", JobTestSupport.words(120)), 8);
    GenerationResult whole = engine.generate(r);
    GenerationResult chunked = RequestLimits.of(0, 16).with(() -> engine.generate(r));
    assertArrayEquals(whole.tokenIds(), chunked.tokenIds());
  }

  @Test
  void aPassedDeadlineStopsTheRequest() {
    GenerationRequest r = GenerationRequest.chat("d", "hello", 4);
    assertThrows(GenerationTimeoutException.class, () -> RequestLimits.of(1, 0).with(() -> engine.generate(r)));
  }
}
