package io.longsieve.engine;

/**
 * Chooses the tokens of a driven run ({@link Engine#drive}) from the logits of each step: teacher
 * forcing (return a given continuation), or greedy decoding that keeps every step's logits. It is called
 * on the engine's own thread while the run holds the device: it must not call the engine.
 */
@FunctionalInterface
public interface StepDriver {

  /**
   * @param step   0 for the logits after the prompt, i after the i-th fed token
   * @param logits (vocab) next-token logits of this step, valid during the call only
   * @return the token to feed next (at position promptTokens + step), or -1 to end the run
   */
  int next(int step, float[] logits);
}
