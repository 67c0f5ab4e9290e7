package io.longsieve.engine.spi;

/**
 * Attention recall of one sequence (evaluation only, {@link ModelRunner.Sequence#recordAttention}): at
 * each probed query position, layer and query head, the share of the attention mass dense attention
 * would give that query (its own q against every key so far, in the same run) that falls on the keys
 * the sequence's policy actually attended. 1 for dense attention and for any policy whose selection
 * covers every key; 0 for a query the policy gave no keys at all (TSA's rows outside their head's list).
 *
 * @param byLayer          (layer) mean over the probed positions (prefill and decode) and query heads
 * @param prefill          mean over layers, heads and the probed prompt positions; NaN when none was probed
 * @param decode           the same over the probed decode positions; NaN when none was probed
 * @param prefillPositions prompt positions probed
 * @param decodePositions  decode positions probed
 */
public record AttentionRecall(double[] byLayer, double prefill, double decode, int prefillPositions,
                              int decodePositions) {

  public AttentionRecall {
    byLayer = byLayer.clone();
  }

  @Override
  public double[] byLayer() {
    return byLayer.clone();
  }

  /** Mean over layers (NaN when no layer has a value). */
  public double mean() {
    double s = 0;
    int n = 0;
    for (double v : byLayer) {
      if (!Double.isNaN(v)) {
        s += v;
        n++;
      }
    }
    return n == 0 ? Double.NaN : s / n;
  }
}
