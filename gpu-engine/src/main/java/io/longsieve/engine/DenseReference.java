package io.longsieve.engine;

/**
 * What a policy is measured against ({@link FidelityMeter}): dense attention's greedy continuation of a
 * prompt and dense attention's next-token logits along it. Made once per document and reused for every
 * policy. Holds {@code tokens.length × vocab} floats (64 steps of a 128K vocabulary: 32 MB).
 *
 * @param promptTokens the prompt's length in tokens
 * @param tokens       (steps) the greedy continuation, ending with an end-of-sequence id when one came
 * @param logits       (steps, vocab) dense logits before each continuation token; tokens[i] is their argmax
 */
public record DenseReference(int promptTokens, int[] tokens, float[][] logits) {

  public int steps() {
    return tokens.length;
  }
}
