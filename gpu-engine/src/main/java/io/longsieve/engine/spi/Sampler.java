package io.longsieve.engine.spi;

import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * Picks the next token from logits: greedy (argmax, lowest id on ties) or temperature + top-p
 * (nucleus) with a per-request seeded generator. Buffers are sized once per vocabulary.
 *
 * <p>A request under a JSON schema sets the step's allowed tokens ({@link #constrain}): the others'
 * logits become -infinity before the pick, and a nucleus never keeps a token of probability 0, so
 * the pick is always an allowed token. Backends that sample on a device read {@link #allowed()} and
 * apply the same mask there.
 */
public final class Sampler {

  private final SamplingParams params;
  private final SplittableRandom random;
  private final long[] order;    // (vocab) probability bits << 32 | id, for the nucleus sort
  private long[] allowed;        // (ceil(vocab / 64)) bit i: token i may be picked; null: any token

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

  /** The tokens the next pick may take (bit i of word i / 64: token i), or null for any; not copied. */
  public void constrain(long[] allowed) {
    this.allowed = allowed;
  }

  /** The mask set by {@link #constrain}, or null. */
  public long[] allowed() {
    return allowed;
  }

  public int next(float[] logits, int vocab) {
    if (allowed != null) mask(logits, vocab, allowed);
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
      float p = Float.intBitsToFloat((int) (order[r] >>> 32));
      if (allowed != null && p == 0 && keep > 0) break; // a masked token (or one that underflowed) is never drawn
      mass += p;
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

  /** Sets the logits of tokens outside {@code allowed} to -infinity. */
  public static void mask(float[] logits, int vocab, long[] allowed) {
    for (int w = 0; w < allowed.length; w++) {
      long bits = allowed[w];
      if (bits == -1L) continue;
      int end = Math.min(vocab, (w + 1) << 6);
      for (int i = w << 6; i < end; i++) if ((bits & 1L << i) == 0) logits[i] = Float.NEGATIVE_INFINITY;
    }
  }

  public static int argmax(float[] logits, int vocab) {
    int best = 0;
    for (int i = 1; i < vocab; i++) if (logits[i] > logits[best]) best = i;
    return best;
  }
}
