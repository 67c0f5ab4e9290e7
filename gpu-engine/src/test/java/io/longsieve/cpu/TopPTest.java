package io.longsieve.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.longsieve.cpu.kernels.CpuOps;
import org.junit.jupiter.api.Test;

/** The top-p definition the device sampler follows (CpuOps.topPNucleus / topPIndexOrder). */
class TopPTest {

  /** Logits of probabilities 0.1, 0.4, 0.2, 0.3 at temperature 1. */
  static final float[] LOGITS = {(float) Math.log(0.1), (float) Math.log(0.4), (float) Math.log(0.2), (float) Math.log(0.3)};

  @Test
  void nucleusIsTheSmallestTopSetReachingTopP() {
    assertArrayEquals(new boolean[] {false, true, false, true}, CpuOps.topPNucleus(LOGITS, 4, 1.0, 0.7));
    assertArrayEquals(new boolean[] {false, true, true, true}, CpuOps.topPNucleus(LOGITS, 4, 1.0, 0.75));
    assertArrayEquals(new boolean[] {true, true, true, true}, CpuOps.topPNucleus(LOGITS, 4, 1.0, 1.0));
  }

  @Test
  void drawWalksKeptIdsInIdOrder() {
    // kept {1: 0.4, 3: 0.3}, mass 0.7: u * 0.7 below 0.4 picks id 1, above picks id 3
    assertEquals(1, CpuOps.topPIndexOrder(LOGITS, 4, 1.0, 0.7, 0.0));
    assertEquals(1, CpuOps.topPIndexOrder(LOGITS, 4, 1.0, 0.7, 0.5));
    assertEquals(3, CpuOps.topPIndexOrder(LOGITS, 4, 1.0, 0.7, 0.6));
    assertEquals(3, CpuOps.topPIndexOrder(LOGITS, 4, 1.0, 0.7, 0.999));
  }

  @Test
  void lowTemperatureConcentratesOnTheArgmax() {
    assertArrayEquals(new boolean[] {false, true, false, false}, CpuOps.topPNucleus(LOGITS, 4, 0.05, 0.9));
  }
}
