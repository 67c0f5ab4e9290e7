package io.longsieve.structured;

import io.longsieve.structured.SchemaNode.NumberNode;
import java.math.BigDecimal;
import java.math.RoundingMode;

/**
 * The numbers structured output writes, and whether a prefix of one can still end within the
 * schema's bounds. Integers: {@code -?(0|[1-9][0-9]{0,17})}, so every value fits a long. Numbers:
 * the same with at most {@link #NUMBER_INT_DIGITS} integer digits and an optional fraction of at
 * most {@link #NUMBER_FRACTION_DIGITS} digits, no exponent: at most 15 significant digits, which a
 * double holds exactly, so the value a reader parses is the one checked here. Bounds are checked in
 * exact decimal arithmetic.
 */
final class NumberText {
  private NumberText() {}

  static final int INTEGER_DIGITS = 18;
  static final int NUMBER_INT_DIGITS = 9;
  static final int NUMBER_FRACTION_DIGITS = 6;

  /** Whether {@code prefix} is a prefix of a number of this node's form whose value is within its bounds. */
  static boolean live(NumberNode n, String prefix) {
    if (prefix.isEmpty()) return live(n, "-") || anyDigit(n, "");
    if (prefix.equals("-")) return anyDigit(n, "-");
    if (!wellFormedPrefix(n, prefix)) return false;
    boolean negative = prefix.charAt(0) == '-';
    String body = negative ? prefix.substring(1) : prefix;
    int dot = body.indexOf('.');
    int step = n.integer ? 0 : NUMBER_FRACTION_DIGITS; // values lie on a grid of 10^-step
    if (dot >= 0) {
      String frac = body.substring(dot + 1);
      BigDecimal lo = new BigDecimal(body.substring(0, dot) + "." + (frac.isEmpty() ? "0" : frac));
      BigDecimal hi = lo.add(BigDecimal.ONE.movePointLeft(frac.length())).subtract(BigDecimal.ONE.movePointLeft(step));
      return hits(n, negative, lo, hi, step);
    }
    int maxInt = n.integer ? INTEGER_DIGITS : NUMBER_INT_DIGITS;
    BigDecimal d = new BigDecimal(body);
    int more = body.equals("0") ? 0 : maxInt - body.length();
    for (int e = 0; e <= more; e++) {
      BigDecimal lo = d.movePointRight(e);
      BigDecimal hi = d.add(BigDecimal.ONE).movePointRight(e).subtract(BigDecimal.ONE.movePointLeft(step));
      if (hits(n, negative, lo, hi, step)) return true;
    }
    return false;
  }

  /** Whether {@code text} is a whole number of this node's form within its bounds. */
  static boolean complete(NumberNode n, String text) {
    if (text.isEmpty() || text.endsWith("-") || text.endsWith(".") || !wellFormedPrefix(n, text)) return false;
    return inBounds(n, new BigDecimal(text));
  }

  static boolean inBounds(NumberNode n, BigDecimal v) {
    if (n.min != null) {
      int c = v.compareTo(n.min);
      if (c < 0 || c == 0 && n.minExclusive) return false;
    }
    if (n.max != null) {
      int c = v.compareTo(n.max);
      if (c > 0 || c == 0 && n.maxExclusive) return false;
    }
    return true;
  }

  private static boolean anyDigit(NumberNode n, String prefix) {
    for (char c = '0'; c <= '9'; c++) if (live(n, prefix + c)) return true;
    return false;
  }

  /** Syntax and digit counts of a prefix (no leading zeros, one dot after a digit for numbers). */
  static boolean wellFormedPrefix(NumberNode n, String s) {
    int i = s.startsWith("-") ? 1 : 0;
    int intDigits = 0, fracDigits = 0;
    boolean dot = false;
    for (; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '.') {
        if (n.integer || dot || intDigits == 0) return false;
        dot = true;
      } else if (c >= '0' && c <= '9') {
        if (dot) {
          fracDigits++;
        } else {
          if (intDigits == 1 && s.charAt(i - 1) == '0') return false; // leading zero
          intDigits++;
        }
      } else {
        return false;
      }
    }
    return intDigits <= (n.integer ? INTEGER_DIGITS : NUMBER_INT_DIGITS) && fracDigits <= NUMBER_FRACTION_DIGITS;
  }

  /**
   * Whether some grid point g (a multiple of 10^-step) in [lo, hi] of magnitudes gives a value
   * (g, or -g when negative) within the bounds.
   */
  private static boolean hits(NumberNode n, boolean negative, BigDecimal lo, BigDecimal hi, int step) {
    // bounds on the magnitude
    BigDecimal mlo = negative ? neg(n.max) : n.min;
    boolean mloEx = negative ? n.maxExclusive : n.minExclusive;
    BigDecimal mhi = negative ? neg(n.min) : n.max;
    boolean mhiEx = negative ? n.minExclusive : n.maxExclusive;
    BigDecimal g = lo;
    if (mlo != null) {
      BigDecimal c = mlo.setScale(step, RoundingMode.CEILING);
      if (mloEx && c.compareTo(mlo) == 0) c = c.add(BigDecimal.ONE.movePointLeft(step));
      if (c.compareTo(g) > 0) g = c;
    }
    if (g.compareTo(hi) > 0) return false;
    if (mhi == null) return true;
    int c = g.compareTo(mhi);
    return c < 0 || c == 0 && !mhiEx;
  }

  private static BigDecimal neg(BigDecimal v) {
    return v == null ? null : v.negate();
  }
}
