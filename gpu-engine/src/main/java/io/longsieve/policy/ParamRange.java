package io.longsieve.policy;

/**
 * The valid values of a numeric policy parameter: an interval whose ends may each be open, e.g.
 * {@code (0, 1]} for SelKV's kept ratio. Counts of tokens, pages and layers stop at
 * {@link #MAX_COUNT}, far beyond any context window, so no arithmetic on them can overflow an int
 * (sinks + recent, k + window, ...).
 */
record ParamRange(double min, boolean minOpen, double max, boolean maxOpen) {

  /** The largest token, page or layer count a policy accepts: 2^24 = 16,777,216. */
  static final int MAX_COUNT = 1 << 24;

  /** Whole numbers from {@code min} to {@link #MAX_COUNT}. */
  static ParamRange count(int min) {
    return new ParamRange(min, false, MAX_COUNT, false);
  }

  static ParamRange closed(double min, double max) {
    return new ParamRange(min, false, max, false);
  }

  static ParamRange openAbove(double min, double max) {
    return new ParamRange(min, false, max, true);
  }

  static ParamRange openBelow(double min, double max) {
    return new ParamRange(min, true, max, false);
  }

  /** From {@code min} up, any finite number. */
  static ParamRange atLeast(double min) {
    return new ParamRange(min, false, Double.POSITIVE_INFINITY, true);
  }

  /** Any finite number (a threshold whose meaning is clear at both ends). */
  static ParamRange any() {
    return new ParamRange(Double.NEGATIVE_INFINITY, true, Double.POSITIVE_INFINITY, true);
  }

  boolean contains(double v) {
    return (minOpen ? v > min : v >= min) && (maxOpen ? v < max : v <= max);
  }

  /** True when {@code v} is beyond the upper end (reported as "too large"). */
  boolean above(double v) {
    return maxOpen ? v >= max : v > max;
  }

  /** The interval as the catalog and the error messages write it: {@code [0, 1)}, {@code >= 1}. */
  String text() {
    if (max == Double.POSITIVE_INFINITY && min == Double.NEGATIVE_INFINITY) return "any finite number";
    if (max == Double.POSITIVE_INFINITY) return (minOpen ? "> " : ">= ") + number(min);
    return (minOpen ? "(" : "[") + number(min) + ", " + number(max) + (maxOpen ? ")" : "]");
  }

  private static String number(double v) {
    return v == Math.rint(v) && Math.abs(v) < 1e15 ? Long.toString((long) v) : Double.toString(v);
  }
}
