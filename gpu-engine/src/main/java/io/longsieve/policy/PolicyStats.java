package io.longsieve.policy;

/**
 * What a policy reports for a request (definitions in {@link SelectionStats}); every CPU policy,
 * dense included, fills it. {@link #DENSE} stands for a policy that never ran.
 *
 * @param attendedTokensMean      mean over decode steps, layers and query heads of the keys one decode
 *                                query attended to; NaN without decode steps
 * @param selectedFractionByLayer per layer, attended / causally visible (query, key) pairs, prefill and decode
 * @param selectionCacheHitRate   hits / lookups of the TokenSelect Selection Cache, NaN where none ran
 * @param kvBytesAfter            KV bytes after compression; -1: no compression ran
 * @param sparseLayers            layers whose prefill attention was sparse at least once (Token Sparse Attention)
 * @param selectionMs             time spent choosing tokens: scoring, top-k, merging (the engine's stats
 *                                take what the prefill spent, see GenerationStats)
 */
public record PolicyStats(double attendedTokensMean, float[] selectedFractionByLayer, double selectionCacheHitRate,
                          long kvBytesAfter, int sparseLayers, double selectionMs) implements java.io.Serializable {
  public static final PolicyStats DENSE = new PolicyStats(Double.NaN, new float[0], Double.NaN, -1, 0, 0);
}
