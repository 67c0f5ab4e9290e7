package io.longsieve.eval;

import io.longsieve.engine.Fidelity;
import io.longsieve.policy.PolicyStats;

/**
 * One document under one policy.
 *
 * @param policy           the policy string as given
 * @param item             the document
 * @param output           the generated text ("" on error)
 * @param score            0..1 (see {@link Scoring}); 0 on error
 * @param attendedFraction mean over layers of the engine's selected fraction: attended / causally visible
 *                         (query, key) pairs, prefill and decode together; 1 for dense
 * @param ms               wall time of the request
 * @param inputTokens      prompt tokens after the chat template
 * @param error            null, or why the document failed (e.g. prompt too long)
 * @param stats            the policy's statistics for the request (cache hit rate, fraction per layer, KV bytes);
 *                         null where the caller did not keep them (errors, the Spark path, which has them in Parquet)
 * @param fidelity         the policy against dense attention along dense attention's own continuation
 *                         ({@link io.longsieve.engine.FidelityMeter}); null where not measured or where it failed
 */
public record DocResult(String policy, SuiteItem item, String output, double score, double attendedFraction, double ms,
    int inputTokens, String error, PolicyStats stats, Fidelity fidelity) {

  /** A result without a fidelity measurement (the Spark job's path). */
  public DocResult(String policy, SuiteItem item, String output, double score, double attendedFraction, double ms,
      int inputTokens, String error, PolicyStats stats) {
    this(policy, item, output, score, attendedFraction, ms, inputTokens, error, stats, null);
  }
}
