package io.longsieve.attention;

/**
 * What a policy reports for a request; dense attention reports NaN/empty where nothing was selected.
 *
 * @param attendedTokensMean      mean over decode steps and layers of the tokens attended to
 * @param selectedFractionByLayer per layer, attended / available tokens averaged over the request
 * @param selectionCacheHitRate   hits / lookups, NaN without a Selection Cache
 * @param kvBytesAfter            KV bytes after compression; -1: no compression ran
 * @param sparseLayers            layers whose prefill attention was sparse
 * @param selectionMs             time spent choosing tokens
 */
public record PolicyStats(double attendedTokensMean, float[] selectedFractionByLayer, double selectionCacheHitRate,
                          long kvBytesAfter, int sparseLayers, double selectionMs) {
  public static final PolicyStats DENSE = new PolicyStats(Double.NaN, new float[0], Double.NaN, -1, 0, 0);
}
