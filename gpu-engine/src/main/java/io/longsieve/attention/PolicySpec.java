package io.longsieve.attention;

import java.io.Serializable;

/**
 * A request's attention policy by name, validated before any work starts so a misspelt policy
 * fails at submit time, not on an executor hours later.
 *
 * <p>Grammar: terms joined by {@code +}, each {@code name[:key=value,...]}. Today the engine knows
 * {@code dense}; the sparse policies register their names here as they land.
 */
public record PolicySpec(String canonical) implements Serializable {

  public static PolicySpec parse(String text) {
    String t = text == null || text.isBlank() ? "dense" : text.trim().toLowerCase(java.util.Locale.ROOT);
    if (!t.equals("dense")) {
      throw new IllegalArgumentException("unknown attention policy '" + text + "'; known: dense");
    }
    return new PolicySpec(t);
  }

  /**
   * The policy a run asks for, from the CLI's {@code --policy} (a whole spec) or its per-slot
   * {@code --prefill}, {@code --kv} and {@code --decode} options (null where not given). The result
   * is a string {@link #parse} accepts.
   */
  public static String compose(String policy, String prefill, String kv, String decode) {
    boolean slots = prefill != null || kv != null || decode != null;
    if (!slots) return parse(policy).canonical();
    if (policy != null && !policy.isBlank() && !policy.equals("dense")) {
      throw new IllegalArgumentException("give either --policy or --prefill/--kv/--decode, not both");
    }
    boolean allDense = (prefill == null || prefill.equals("dense")) && (kv == null || kv.equals("none"))
        && (decode == null || decode.equals("dense"));
    if (!allDense) throw new IllegalArgumentException("sparse policies are not available yet; known: dense");
    return "dense";
  }

  /** A fresh CPU policy object for one request. */
  public AttentionPolicy createCpu() {
    return new DenseAttention();
  }
}
