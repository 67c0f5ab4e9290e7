package io.longsieve.engine;

import io.longsieve.engine.spi.AttentionRecall;

/**
 * How closely a policy follows dense attention on one prompt, measured along dense attention's own
 * greedy continuation (teacher forcing, {@link FidelityMeter}), so the figures do not depend on what
 * the model knows: at every step both runs see the same tokens and only attention differs.
 *
 * @param steps           next-token distributions compared (the dense continuation's length)
 * @param klMean          mean over steps of KL(dense ‖ policy) in nats
 * @param klMax           largest per-step KL
 * @param top1Agreement   share of steps where the policy's most likely token is dense attention's
 * @param firstDivergence first step where the policy's top-1 differs (0: the first answer token); -1 when never
 * @param recall          attention recall at the probed positions; null when not measured
 */
public record Fidelity(int steps, double klMean, double klMax, double top1Agreement, int firstDivergence,
                       AttentionRecall recall) {

  /** Mean attention recall over layers, NaN when not measured. */
  public double recallMean() {
    return recall == null ? Double.NaN : recall.mean();
  }
}
