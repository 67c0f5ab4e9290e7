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

  /** A fresh CPU policy object for one request. */
  public AttentionPolicy createCpu() {
    return new DenseAttention();
  }
}
