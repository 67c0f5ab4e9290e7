package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class RopeTest {

  @Test
  void llama3ScalingKeepsHighFrequenciesAndDividesLowOnes() {
    RopeScaling s = new RopeScaling("llama3", 8, 1, 4, 8192);
    float[] plain = Rope.inverseFrequencies(128, 500000, RopeScaling.NONE);
    float[] scaled = Rope.inverseFrequencies(128, 500000, s);
    assertEquals(plain[0], scaled[0]);                   // wavelength 2π < 2048: kept
    assertEquals(plain[63] / 8, scaled[63], 1e-12);      // longest wavelength: divided by factor
    for (int i = 0; i < 64; i++) {                        // every frequency lies between the two
      assertEquals(true, scaled[i] <= plain[i] + 1e-12 && scaled[i] >= plain[i] / 8 - 1e-12);
    }
  }

  @Test
  void rotationIsRotateHalfAndPreservesNorm() {
    ModelConfig c = new ModelConfig("llama", 8, 16, 1, 1, 1, 8, 10, 1e-5, 10000, RopeScaling.NONE, 64, false, false, 0, -1,
        java.util.List.of());
    Rope rope = new Rope(c);
    float[] v = {1, 2, 3, 4, 5, 6, 7, 8};
    float[] r = v.clone();
    rope.rotate(r, 0, 1, 0);
    assertArrayEquals(v, r, 0f);                          // position 0 is the identity
    rope.rotate(r, 0, 1, 3);
    double n0 = 0, n1 = 0;
    for (int i = 0; i < 8; i++) {
      n0 += v[i] * v[i];
      n1 += r[i] * r[i];
    }
    assertEquals(n0, n1, 1e-4);
    // element 0 pairs with element 4, rotated by 3 radians (inverse frequency 1 for i = 0)
    assertEquals(1 * Math.cos(3) - 5 * Math.sin(3), r[0], 1e-5);
    assertEquals(5 * Math.cos(3) + 1 * Math.sin(3), r[4], 1e-5);
  }
}
