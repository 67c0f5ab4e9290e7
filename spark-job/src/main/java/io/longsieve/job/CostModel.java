package io.longsieve.job;

import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import java.io.Serializable;

/**
 * The driver's estimate of what one document costs the engine, in <em>prompt-token units</em>: one
 * unit is one prompt token through the weights in prefill. Only ratios matter (packing, ETA), so the
 * unit's wall time never has to be known.
 *
 * <pre>
 *   cost = P                                          prefill through the weights (linear in P)
 *        + pairCost · f(P) · P²/2                     prefill attention: the causal triangle, scaled
 *                                                     by the policy's budget f (AttentionBudget)
 *        + N · (decodeStep + decodeKeyCost · K(P))    N output tokens; each step streams the weights
 *                                                     and reads K(P) cached keys (policy-dependent)
 * </pre>
 *
 * <p>Defaults are for Llama-3.1-8B-shaped models on an H200 (DESIGN.md figures): a query-key pair
 * costs 4·layers·qDim FLOPs against 2·params per token → 3.3e-5; one batch-1 decode step streams
 * 16 GB of weights (≈3.8 ms) against ≈25 µs per prefill token → ≈150, divided by the engine's decode
 * batching (≈4 documents at once) → 40; one cached key read per step moves 2·layers·kvDim bf16
 * values, 1/122,000 of the weights → 150/122,000 = 1.2e-3. {@link #forModel} rescales the two shape
 * terms for another model.
 *
 * @param pairCost      prefill attention cost of one query-key pair
 * @param decodeStep    weight cost of one decode step of one document
 * @param decodeKeyCost cost of reading one cached key (and its value) in one decode step
 * @param budget        the attention policy's budget
 */
public record CostModel(double pairCost, double decodeStep, double decodeKeyCost, AttentionBudget budget)
    implements Serializable {

  /** Characters per token when the driver estimates tokens from text length (English BPE: ≈4). */
  public static final double DEFAULT_CHARS_PER_TOKEN = 4.0;

  public CostModel {
    if (!(pairCost >= 0) || !(decodeStep >= 0) || !(decodeKeyCost >= 0)) {
      throw new IllegalArgumentException("cost coefficients must be >= 0");
    }
    if (budget == null) budget = AttentionBudget.DENSE;
  }

  /** Llama-3.1-8B-shaped defaults with the given policy (null: dense). */
  public static CostModel defaults(PolicySpec policy) {
    return new CostModel(3.3e-5, 40, 1.2e-3, AttentionBudget.of(policy));
  }

  /** {@link #defaults(PolicySpec)} from a policy's text, for tests and tools (see {@link AttentionBudget#of(String)}). */
  public static CostModel defaults(String policy) {
    return new CostModel(3.3e-5, 40, 1.2e-3, AttentionBudget.of(policy));
  }

  /**
   * Defaults rescaled to a model's shape: pairCost = 2·layers·qDim / params and decodeKeyCost =
   * 150 · 2·layers·kvDim / params (the batch-1 step of 150 units is what a key read is measured
   * against, since batching shares weight reads but not KV reads).
   */
  public static CostModel forModel(ModelConfig c, PolicySpec policy) {
    double params = parameters(c);
    double pair = 2.0 * c.numLayers() * c.qDim() / params;
    double key = 150.0 * 2.0 * c.numLayers() * c.kvDim() / params;
    return new CostModel(pair, 40, key, AttentionBudget.of(policy));
  }

  /** Weights touched per token: attention and MLP projections of every layer plus the LM head. */
  static double parameters(ModelConfig c) {
    double d = c.hiddenSize();
    double perLayer = d * c.qDim() * 2 + d * c.kvDim() * 2 + 3 * d * c.intermediateSize();
    return c.numLayers() * perLayer + (double) c.vocabSize() * d;
  }

  /** Cost of a document with {@code promptTokens} tokens in and up to {@code outputTokens} out. */
  public double cost(int promptTokens, int outputTokens) {
    double prefill = prefillCost(promptTokens);
    double keys = budget.decodeKeys(promptTokens + outputTokens / 2);
    double decode = Math.max(0, outputTokens) * (decodeStep + decodeKeyCost * keys);
    return prefill + decode;
  }

  /**
   * The prefill's part of {@link #cost}: P + pairCost · f(P) · P²/2. For a prompt prefix that several
   * documents share, what each of them after the first does not spend (prefix reuse): its queries and
   * keys are computed once, and the others' queries still attend to it (their own part's cost).
   */
  public double prefillCost(int promptTokens) {
    double p = Math.max(0, promptTokens);
    return p + pairCost * budget.attentionBudgetFraction(promptTokens) * p * p / 2;
  }

  /** Tokens a text of {@code chars} characters is expected to have, at least 1. */
  public static int estimateTokens(long chars, double charsPerToken) {
    if (!(charsPerToken > 0)) throw new IllegalArgumentException("charsPerToken must be > 0");
    return (int) Math.max(1, Math.min(Integer.MAX_VALUE, Math.ceil(chars / charsPerToken)));
  }
}
