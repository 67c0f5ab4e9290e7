package io.longsieve.job;

import java.io.Serializable;
import java.util.Locale;

/**
 * How much of the dense attention work a policy string leaves, for the driver's cost estimate only
 * (the engine validates and runs the policy; this class never rejects one it does not know, it
 * prices it as dense, the safe overestimate).
 *
 * <p>A policy string is terms joined by {@code +}, each {@code name[:key=value,...]}, e.g.
 * {@code "tsa + selkv:ratio=0.25 + tokenselect:k=2048"}. Two numbers come out of it:
 *
 * <ul>
 *   <li>{@link #attentionBudgetFraction(int)}: the share of the causal prefill triangle (P²/2 query-key
 *       pairs for a P-token prompt) that is computed.
 *   <li>{@link #decodeKeys(int)}: keys each decode step attends to.
 * </ul>
 *
 * <p>The rules, deliberately simple (see research/algorithms.md for the defaults):
 *
 * <ul>
 *   <li>{@code tokenselect} ({@code k}=2048, {@code sinks}=128, {@code window}=512): every query attends
 *       to at most B = k + sinks + window keys, in prefill (chunked) and decode. For P &gt; B the share
 *       of the triangle is exactly 1 − (1 − B/P)², since query i attends min(i, B) keys.
 *   <li>{@code tsa} ({@code keep}=0.5, {@code layers}=0.5): a share {@code layers} of the layers is sparse
 *       and keeps a share {@code keep} of the tokens there, for prompts longer than 1152 tokens (its
 *       activation threshold); decode stays dense. The true keep ratio depends on the text (tail mass
 *       τ = 0.005); 0.5 is a middle guess, set {@code keep} in the policy to price it differently.
 *   <li>{@code selkv}, {@code snapkv}, {@code h2o}, {@code streaming} as KV compression ({@code ratio}=0.25):
 *       decode attends to that share of the prompt's keys; prefill is unchanged.
 *   <li>{@code quest} ({@code budget}=2048) as decode policy: B = budget keys per step.
 *   <li>{@code dense} and anything unknown: everything.
 * </ul>
 */
public final class AttentionBudget implements Serializable {

  /** Keys a TokenSelect query attends to at most; 0 when TokenSelect is not in the policy. */
  private final int tokenSelectBudget;
  /** TSA: share of layers that are sparse × share of tokens kept there; 1 when TSA is absent. */
  private final double tsaSparseLayers;
  private final double tsaKeep;
  /** Share of prompt keys left after KV compression; 1 without compression. */
  private final double kvRatio;
  /** Keys a Quest-style decode step reads; 0 when absent. */
  private final int decodeBudget;
  private final String policy;

  private AttentionBudget(String policy, int tokenSelectBudget, double tsaSparseLayers, double tsaKeep,
      double kvRatio, int decodeBudget) {
    this.policy = policy;
    this.tokenSelectBudget = tokenSelectBudget;
    this.tsaSparseLayers = tsaSparseLayers;
    this.tsaKeep = tsaKeep;
    this.kvRatio = kvRatio;
    this.decodeBudget = decodeBudget;
  }

  /** Dense attention: every pair in prefill, every cached key in decode. */
  public static final AttentionBudget DENSE = new AttentionBudget("dense", 0, 0, 1, 1, 0);

  /** Reads the budget out of a policy string; null or blank is dense. Malformed numbers are an error. */
  public static AttentionBudget of(String policy) {
    if (policy == null || policy.isBlank()) return DENSE;
    int ts = 0, quest = 0;
    double tsaLayers = 0, tsaKeep = 1, kv = 1;
    for (String term : policy.toLowerCase(Locale.ROOT).split("\\+")) {
      String t = term.trim();
      if (t.isEmpty()) continue;
      int colon = t.indexOf(':');
      String name = colon < 0 ? t : t.substring(0, colon).trim();
      Params p = new Params(colon < 0 ? "" : t.substring(colon + 1), policy);
      switch (name) {
        case "tokenselect", "tokenselect-chunked" -> ts = p.integer("k", 2048) + p.integer("sinks", 128) + p.integer("window", 512);
        case "tsa" -> {
          tsaLayers = p.fraction("layers", 0.5);
          tsaKeep = p.fraction("keep", 0.5);
        }
        case "selkv", "snapkv", "h2o", "streaming" -> kv = Math.min(kv, p.fraction("ratio", 0.25));
        case "quest" -> quest = p.integer("budget", 2048);
        default -> { } // dense, none, and names this estimate does not know: priced as dense
      }
    }
    return new AttentionBudget(policy.trim(), ts, tsaLayers, tsaKeep, kv, quest);
  }

  /**
   * Share of the causal prefill triangle of a {@code tokens}-token prompt that the policy computes, in
   * (0, 1]; 1 for dense.
   */
  public double attentionBudgetFraction(int tokens) {
    if (tokens <= 0) return 1;
    double f = 1;
    if (tokenSelectBudget > 0 && tokens > tokenSelectBudget) {
      double r = 1 - (double) tokenSelectBudget / tokens;
      f = 1 - r * r;
    }
    if (tsaSparseLayers > 0 && tokens > 1152) {
      // sparse layers keep tsaKeep of the tokens on both the query and the key side
      f *= (1 - tsaSparseLayers) + tsaSparseLayers * tsaKeep * tsaKeep;
    }
    return f;
  }

  /** Keys one decode step attends to, with {@code cached} tokens in the sequence before compression. */
  public double decodeKeys(int cached) {
    double keys = cached * kvRatio;
    if (tokenSelectBudget > 0) keys = Math.min(keys, tokenSelectBudget);
    if (decodeBudget > 0) keys = Math.min(keys, decodeBudget);
    return Math.max(1, keys);
  }

  @Override
  public String toString() {
    return "AttentionBudget[" + policy + "]";
  }

  /** {@code key=value} pairs of one term, with the policy string in every error. */
  private record Params(String text, String policy) {
    String raw(String key) {
      for (String kv : text.split(",")) {
        int eq = kv.indexOf('=');
        if (eq > 0 && kv.substring(0, eq).trim().equals(key)) return kv.substring(eq + 1).trim();
      }
      return null;
    }

    int integer(String key, int dflt) {
      String v = raw(key);
      if (v == null) return dflt;
      try {
        int n = Integer.parseInt(v);
        if (n < 0) throw new NumberFormatException();
        return n;
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("policy '" + policy + "': " + key + "=" + v + " is not a non-negative integer");
      }
    }

    double fraction(String key, double dflt) {
      String v = raw(key);
      if (v == null) return dflt;
      try {
        double d = Double.parseDouble(v);
        if (!(d > 0 && d <= 1)) throw new NumberFormatException();
        return d;
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("policy '" + policy + "': " + key + "=" + v + " must be a number in (0, 1]");
      }
    }
  }
}
