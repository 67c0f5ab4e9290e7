package io.longsieve.job;

import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyTerm;
import java.io.Serializable;

/**
 * How much of the dense attention work a policy leaves, for the driver's cost estimate only (the
 * engine runs the policy; this class only prices it). The policy is read with the engine's own
 * grammar ({@link PolicySpec}: prefill × KV compression × decode slots, every parameter filled in);
 * a string that does not parse is priced as dense, the safe overestimate (the run's options reject
 * it before any work anyway).
 *
 * <p>Two numbers come out of it:
 * <ul>
 *   <li>{@link #attentionBudgetFraction(int)}: the share of the causal prefill triangle (P²/2
 *       query-key pairs for a P-token prompt) that the prefill policy computes;
 *   <li>{@link #decodeKeys(int)}: keys one decode step reads after KV compression and decode selection.
 * </ul>
 *
 * <p>The rules, deliberately simple (research/algorithms.md has the algorithms):
 * <ul>
 *   <li>prefill {@code tokenselect}: every query attends to at most B = sinks + k + window keys (k =
 *       k_frac × P when k_frac &gt; 0). Query i attends min(i, B) keys, so the share of the triangle is
 *       exactly 1 − (1 − B/P)² for P &gt; B.
 *   <li>prefill {@code tsa}: the sparse layers (layers=auto: half of them; all; none) keep about half
 *       the tokens on both sides, a share {@link #TSA_KEEP}² of their pairs, once P exceeds
 *       min + window (its activation threshold). The true share depends on the text (tail mass τ).
 *   <li>kv {@code selkv} (ratio), {@code snapkv} (capacity, or ratio), {@code h2o} (heavy + recent),
 *       {@code streaming} (sinks + recent): decode reads that many of the prompt's keys.
 *   <li>decode {@code tokenselect} (sinks + k + window), {@code quest} (budget), {@code streaming}
 *       (sinks + recent): at most that many keys per step.
 * </ul>
 */
public final class AttentionBudget implements Serializable {

  /** Share of tokens a TSA sparse layer keeps, a middle guess (0.005 tail mass drops roughly half). */
  public static final double TSA_KEEP = 0.5;

  private final String policy;
  private final PolicyTerm prefill; // null: dense
  private final PolicyTerm kv;      // null: none
  private final PolicyTerm decode;  // null: dense

  private AttentionBudget(String policy, PolicyTerm prefill, PolicyTerm kv, PolicyTerm decode) {
    this.policy = policy;
    this.prefill = prefill;
    this.kv = kv;
    this.decode = decode;
  }

  /** Dense attention: every pair in prefill, every cached key in decode. */
  public static final AttentionBudget DENSE = new AttentionBudget("dense", null, null, null);

  /** The budget of a policy; null is dense. */
  public static AttentionBudget of(PolicySpec spec) {
    if (spec == null) return DENSE;
    return new AttentionBudget(spec.canonical(), spec.prefill(), spec.kv(), spec.decode());
  }

  /** The budget of a policy's text, for tests and tools; null, blank or unparseable is dense. */
  public static AttentionBudget of(String policy) {
    if (policy == null || policy.isBlank()) return DENSE;
    try {
      return of(PolicySpec.parse(policy));
    } catch (IllegalArgumentException e) {
      return DENSE;
    }
  }

  /**
   * Share of the causal prefill triangle of a {@code tokens}-token prompt that the policy computes, in
   * (0, 1]; 1 for dense.
   */
  public double attentionBudgetFraction(int tokens) {
    if (tokens <= 0 || prefill == null) return 1;
    switch (prefill.name()) {
      case "tokenselect" -> {
        double b = tokenSelectBudget(prefill, tokens);
        if (tokens <= b) return 1;
        double r = 1 - b / tokens;
        return 1 - r * r;
      }
      case "tsa" -> {
        if (tokens <= prefill.intParam("min") + prefill.intParam("window")) return 1;
        double layers = switch (prefill.text("layers")) {
          case "none" -> 0.0;
          case "all" -> 1.0;
          default -> 0.5; // auto (the second half of the layers) or an explicit list
        };
        return (1 - layers) + layers * TSA_KEEP * TSA_KEEP;
      }
      default -> {
        return 1;
      }
    }
  }

  /** Keys one decode step reads, with {@code cached} tokens in the sequence before compression. */
  public double decodeKeys(int cached) {
    double keys = Math.max(1, cached);
    if (kv != null) {
      switch (kv.name()) {
        case "selkv" -> keys *= kv.doubleParam("ratio");
        case "snapkv" -> keys = kv.doubleParam("ratio") > 0 ? keys * kv.doubleParam("ratio") : Math.min(keys, kv.intParam("capacity"));
        case "h2o" -> keys *= Math.min(1, kv.doubleParam("heavy") + kv.doubleParam("recent"));
        case "streaming" -> keys = Math.min(keys, kv.intParam("sinks") + kv.intParam("recent"));
        default -> { }
      }
    }
    if (decode != null) {
      switch (decode.name()) {
        case "tokenselect" -> keys = Math.min(keys, tokenSelectBudget(decode, (int) keys));
        case "quest" -> keys = Math.min(keys, decode.intParam("budget"));
        case "streaming" -> keys = Math.min(keys, decode.intParam("sinks") + decode.intParam("recent"));
        default -> { }
      }
    }
    return Math.max(1, keys);
  }

  private static double tokenSelectBudget(PolicyTerm t, int tokens) {
    double frac = t.doubleParam("k_frac");
    double k = frac > 0 ? frac * tokens : t.intParam("k");
    return t.intParam("sinks") + k + t.intParam("window");
  }

  @Override
  public String toString() {
    return "AttentionBudget[" + policy + "]";
  }
}
