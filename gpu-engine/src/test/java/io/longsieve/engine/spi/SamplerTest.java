package io.longsieve.engine.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class SamplerTest {

  @Test
  void greedyTakesTheLowestIdOnTies() {
    float[] logits = {0.5f, 2f, 2f, 1f};
    assertEquals(1, new Sampler(SamplingParams.GREEDY, 4).next(logits, 4));
  }

  @Test
  void sameSeedSameTokens() {
    float[] logits = new float[50];
    for (int i = 0; i < 50; i++) logits[i] = (float) Math.sin(i);
    SamplingParams p = new SamplingParams(1.0, 0.9, 42);
    Sampler a = new Sampler(p, 50), b = new Sampler(p, 50);
    int differentFromGreedy = 0;
    for (int step = 0; step < 100; step++) {
      int x = a.next(logits, 50);
      assertEquals(x, b.next(logits, 50));
      if (x != Sampler.argmax(logits, 50)) differentFromGreedy++;
    }
    assertTrue(differentFromGreedy > 0, "temperature 1 should sometimes leave the argmax");
  }

  @Test
  void topPKeepsOnlyTheNucleus() {
    float[] logits = {10f, 9.5f, 0f, 0f, 0f, 0f};   // two tokens hold > 99.9% of the mass
    Sampler s = new Sampler(new SamplingParams(1.0, 0.9, 7), 6);
    for (int i = 0; i < 200; i++) assertTrue(s.next(logits, 6) <= 1);
  }

  @Test
  void differentSeedsDiffer() {
    float[] logits = new float[100];
    Sampler a = new Sampler(new SamplingParams(1.0, 1.0, 1), 100), b = new Sampler(new SamplingParams(1.0, 1.0, 2), 100);
    int same = 0;
    for (int i = 0; i < 50; i++) if (a.next(logits, 100) == b.next(logits, 100)) same++;
    assertNotEquals(50, same);
  }
}
