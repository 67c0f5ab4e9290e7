package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.engine.spi.GenerationTimeoutException;
import io.longsieve.engine.spi.RequestLimits;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The per-document retry rules, without an engine: the work is a lambda that records its limits. */
class DocumentAttemptsTest {

  @Test
  void outOfMemoryIsRetriedWithSmallerChunksThenBecomesAnOomRow() {
    List<Integer> chunks = new ArrayList<>();
    DocumentAttempts attempts = new DocumentAttempts(0, 512, null);
    DocumentAttempts.Failed f = assertThrows(DocumentAttempts.Failed.class, () -> attempts.run("d1", () -> {
      chunks.add(RequestLimits.prefillChunk(512));
      throw new IllegalStateException("GPU memory budget exceeded allocating activations");
    }));
    assertEquals(List.of(512, 128, 32), chunks);
    assertEquals("oom", f.status());
    assertTrue(f.getMessage().contains("512, 128, 32"), f.getMessage());
  }

  @Test
  void aRetryThatFitsSucceeds() {
    DocumentAttempts attempts = new DocumentAttempts(0, 512, null);
    String out = attempts.run("d1", () -> {
      if (RequestLimits.prefillChunk(512) > 128) throw new OutOfMemoryError("Java heap space");
      return "ok at " + RequestLimits.prefillChunk(512);
    });
    assertEquals("ok at 128", out);
    assertEquals(512, RequestLimits.prefillChunk(512), "limits do not leak past the attempt");
  }

  @Test
  void injectedOomHitsOnlyTheChosenDocument() {
    DocumentAttempts attempts = new DocumentAttempts(0, 512, "bad");
    assertEquals("fine", attempts.run("good", () -> "fine"));
    DocumentAttempts.Failed f = assertThrows(DocumentAttempts.Failed.class, () -> attempts.run("bad", () -> "never"));
    assertEquals("oom", f.status());
    assertTrue(f.getMessage().contains("injected"), f.getMessage());
  }

  @Test
  void timeoutIsNotRetried() {
    int[] calls = {0};
    DocumentAttempts attempts = new DocumentAttempts(1, 512, null);
    DocumentAttempts.Failed f = assertThrows(DocumentAttempts.Failed.class, () -> attempts.run("slow", () -> {
      calls[0]++;
      throw new GenerationTimeoutException("late");
    }));
    assertEquals("timeout", f.status());
    assertEquals(1, calls[0]);
  }

  @Test
  void deadlineIsInForceDuringTheAttempt() throws Exception {
    DocumentAttempts attempts = new DocumentAttempts(1, 512, null);
    DocumentAttempts.Failed f = assertThrows(DocumentAttempts.Failed.class, () -> attempts.run("slow", () -> {
      long end = System.nanoTime() + 1_500_000_000L;
      while (System.nanoTime() < end) Thread.onSpinWait();
      RequestLimits.checkDeadline(); // what the engine does once per forward chunk
      return "late";
    }));
    assertEquals("timeout", f.status());
  }

  @Test
  void otherErrorsPassThroughAndStickyCudaErrorsFailTheTaskInTheDriver() {
    DocumentAttempts attempts = new DocumentAttempts(0, 512, null);
    assertThrows(IllegalArgumentException.class, () -> attempts.run("d", () -> {
      throw new IllegalArgumentException("unknown policy");
    }));
    assertThrows(DocumentAttempts.FatalDeviceError.class, () -> attempts.run("d", () -> {
      throw new RuntimeException("kernel failed", new RuntimeException("CUDA_ERROR_ILLEGAL_ADDRESS"));
    }));
  }

  @Test
  void classification() {
    assertEquals(DocumentAttempts.Kind.OUT_OF_MEMORY,
        DocumentAttempts.classify(new RuntimeException(new RuntimeException("CUDA_ERROR_OUT_OF_MEMORY"))));
    assertEquals(DocumentAttempts.Kind.STICKY_DEVICE, DocumentAttempts.classify(new RuntimeException("CUDA_ERROR_LAUNCH_FAILED")));
    assertEquals(DocumentAttempts.Kind.OTHER, DocumentAttempts.classify(new RuntimeException("boom")));
  }
}
