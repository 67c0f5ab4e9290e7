package io.longsieve.engine.spi;

import java.io.Serializable;

/**
 * How the next token is chosen. Temperature 0 is greedy (argmax, ties to the lowest id); otherwise
 * softmax(logits / temperature), cut to the smallest set whose mass reaches topP, drawn with a
 * generator seeded by {@code seed}, so a request with the same seed gives the same text.
 */
public record SamplingParams(double temperature, double topP, long seed) implements Serializable {

  public static final SamplingParams GREEDY = new SamplingParams(0, 1, 0);

  /**
   * Smallest positive temperature. Below it sampling is greedy in all but name, and the tiniest values
   * overflow 1/temperature into infinity (below ~3e-39 in the GPU's float32, ~6e-309 in the CPU's double),
   * which turns every probability into NaN and the output into empty tokens.
   */
  public static final double MIN_TEMPERATURE = 1e-6;

  public SamplingParams {
    if (!(temperature >= 0)) throw new IllegalArgumentException("temperature must be >= 0");
    if (temperature > 0 && temperature < MIN_TEMPERATURE) {
      throw new IllegalArgumentException("temperature must be 0 (greedy) or at least " + MIN_TEMPERATURE + ", not "
          + temperature);
    }
    if (!(topP > 0 && topP <= 1)) throw new IllegalArgumentException("topP must be in (0, 1]");
  }

  public boolean greedy() {
    return temperature == 0;
  }
}
