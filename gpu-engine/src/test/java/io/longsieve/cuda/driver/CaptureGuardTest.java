package io.longsieve.cuda.driver;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * The host side of {@link CaptureGuard} (no GPU): a capture on a GPU waits for the calls that tie the
 * legacy stream or the device to its streams, made by any thread, and they wait for it; such calls
 * do not wait for each other, nor for a capture on another GPU; the capturing thread may make them
 * (the driver, not the guard, refuses what is illegal in a capture).
 */
class CaptureGuardTest {

  @Test
  void aCaptureWaitsForASyncCallOfAnotherThreadAndSyncCallsShare() throws Exception {
    AtomicBoolean captured = new AtomicBoolean();
    Thread capturer;
    try (CaptureGuard.Held sync = CaptureGuard.sync(7)) {
      try (CaptureGuard.Held another = CaptureGuard.sync(7)) {  // sync calls share the guard
        assertNotNull(another);
      }
      capturer = new Thread(() -> {
        try (CaptureGuard.Held capture = CaptureGuard.capture(7)) {
          captured.set(true);
        }
      });
      capturer.start();
      awaitParked(capturer);
      assertFalse(captured.get(), "a capture began while another thread's sync call ran");
      try (CaptureGuard.Held otherGpu = CaptureGuard.capture(8)) {  // another GPU: no wait
        assertFalse(captured.get());
      }
    }
    capturer.join();
    assertTrue(captured.get());
  }

  @Test
  void aSyncCallOfAnotherThreadWaitsForACapture() throws Exception {
    AtomicBoolean synced = new AtomicBoolean();
    Thread caller;
    try (CaptureGuard.Held capture = CaptureGuard.capture(9)) {
      try (CaptureGuard.Held own = CaptureGuard.sync(9)) {  // the capturing thread itself: no deadlock
        assertNotNull(own);
      }
      caller = new Thread(() -> {
        try (CaptureGuard.Held sync = CaptureGuard.sync(9)) {
          synced.set(true);
        }
      });
      caller.start();
      awaitParked(caller);
      assertFalse(synced.get(), "a sync call ran during another thread's capture");
    }
    caller.join();
    assertTrue(synced.get());
  }

  /** Waits until t blocks on the guard (it parks there). */
  private static void awaitParked(Thread t) throws InterruptedException {
    while (t.getState() != Thread.State.WAITING) {
      assertTrue(t.isAlive(), "the thread finished without waiting");
      Thread.sleep(1);
    }
  }
}
