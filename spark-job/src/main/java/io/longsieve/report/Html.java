package io.longsieve.report;

import java.util.Locale;

/** Text helpers for the report page: every piece of user data (doc ids, error messages) goes through {@link #escape}. */
final class Html {

  private Html() {}

  /** Escapes text for HTML element content and for quoted attribute values (also valid inside SVG). */
  static String escape(String s) {
    if (s == null) {
      return "";
    }
    StringBuilder b = new StringBuilder(s.length() + 16);
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '&' -> b.append("&amp;");
        case '<' -> b.append("&lt;");
        case '>' -> b.append("&gt;");
        case '"' -> b.append("&quot;");
        case '\'' -> b.append("&#39;");
        default -> {
          // control characters other than tab/newline are not allowed in XML (inline SVG) and say nothing to a reader
          if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            b.append('\uFFFD');
          } else {
            b.append(c);
          }
        }
      }
    }
    return b.toString();
  }

  /** Shortens long user text (error messages) for a table cell; the full text goes in a title attribute. */
  static String truncate(String s, int max) {
    if (s == null || s.length() <= max) {
      return s == null ? "" : s;
    }
    return s.substring(0, max - 1) + "…";
  }

  /** A number for a reader: thousands separators for counts, three significant figures for the rest. */
  static String num(double v) {
    if (Double.isNaN(v) || Double.isInfinite(v)) {
      return "–";
    }
    double a = Math.abs(v);
    if (a == 0) {
      return "0";
    }
    if (a >= 1000 || v == Math.rint(v) && a >= 1) {
      return String.format(Locale.ROOT, "%,.0f", v);
    }
    if (a >= 100) {
      return String.format(Locale.ROOT, "%.0f", v);
    }
    if (a >= 10) {
      return String.format(Locale.ROOT, "%.1f", v);
    }
    if (a >= 0.01 || a == 0) {
      return String.format(Locale.ROOT, "%.2f", v);
    }
    return String.format(Locale.ROOT, "%.2g", v);
  }

  static String num(long v) {
    return String.format(Locale.ROOT, "%,d", v);
  }

  /** A fraction as a percentage, e.g. 0.253 → "25.3%". */
  static String pct(double v) {
    return Double.isNaN(v) ? "–" : String.format(Locale.ROOT, "%.1f%%", 100 * v);
  }

  /** Milliseconds in the unit a reader expects: ms below 10 s, then s, min, h. */
  static String duration(double ms) {
    if (Double.isNaN(ms)) {
      return "–";
    }
    if (ms < 10_000) {
      return num(ms) + " ms";
    }
    double s = ms / 1000;
    if (s < 600) {
      return num(s) + " s";
    }
    if (s < 36_000) {
      return num(s / 60) + " min";
    }
    return num(s / 3600) + " h";
  }
}
