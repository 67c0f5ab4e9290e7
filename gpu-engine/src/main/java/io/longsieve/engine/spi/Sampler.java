package io.longsieve.engine.spi;

import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * Picks the next token from logits: greedy (argmax, lowest id on ties) or temperature + top-p
 * (nucleus) with a per-request seeded generator. Buffers are sized once per vocabulary.
 */
public final class Sampler {

  private final SamplingParams params;
  private final SplittableRandom random;
  private final long[] order;    // (vocab) probability bits << 32 | id, for the nucleus sort

  public Sampler(SamplingParams params, int vocab) {
    this.params = params;
    this.random = new SplittableRandom(params.seed());
    this.order = params.greedy() ? null : new long[vocab];
  }

  public SamplingParams params() {
    return params;
  }

  /** One draw in [0, 1) from this request's seeded generator (for samplers that run on a device). */
  public double uniform() {
    return random.nextDouble();
  }

  public int next(float[] logits, int vocab) {
    if (params.greedy()) return argmax(logits, vocab);
    float max = Float.NEGATIVE_INFINITY;
    for (int i = 0; i < vocab; i++) max = Math.max(max, logits[i]);
    double sum = 0;
    double invT = 1.0 / params.temperature();
    for (int i = 0; i < vocab; i++) sum += Math.exp((logits[i] - max) * invT);
    for (int i = 0; i < vocab; i++) {
      float p = (float) (Math.exp((logits[i] - max) * invT) / sum);
      order[i] = ((long) Float.floatToIntBits(p) << 32) | (vocab - 1 - i); // ties: lower id first
    }
    Arrays.sort(order, 0, vocab);
    double mass = 0;
    int keep = 0;
    for (int r = vocab - 1; r >= 0; r--) {
      mass += Float.intBitsToFloat((int) (order[r] >>> 32));
      keep++;
      if (mass >= params.topP()) break;
    }
    double u = random.nextDouble() * mass;
    double acc = 0;
    for (int r = vocab - 1; r >= vocab - keep; r--) {
      acc += Float.intBitsToFloat((int) (order[r] >>> 32));
      if (u < acc) return vocab - 1 - (int) (order[r] & 0xffffffffL);
    }
    return vocab - 1 - (int) (order[vocab - keep] & 0xffffffffL);
  }

  public static int argmax(float[] logits, int vocab) {
    int best = 0;
    for (int i = 1; i < vocab; i++) if (logits[i] > logits[best]) best = i;
    return best;
  }
}
