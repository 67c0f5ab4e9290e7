package io.longsieve.job;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * How close two answers are, word by word (whitespace-separated): SQuAD's token F1 and the first
 * word where they part. The shadow audit compares an answer with the dense one; the report compares
 * an answer with the input's {@code reference}.
 */
public final class AnswerAgreement {
  private AnswerAgreement() {}

  static String[] words(String s) {
    String t = s == null ? "" : s.trim();
    return t.isEmpty() ? new String[0] : t.split("\\s+");
  }

  /** Bag-of-words overlap F1 of lower-cased words; 1 when both are empty, 0 when one is. */
  public static double tokenF1(String answer, String reference) {
    String[] a = words(answer == null ? null : answer.toLowerCase(Locale.ROOT));
    String[] b = words(reference == null ? null : reference.toLowerCase(Locale.ROOT));
    if (a.length == 0 || b.length == 0) return a.length == b.length ? 1.0 : 0.0;
    Map<String, Integer> bag = new HashMap<>();
    for (String w : b) bag.merge(w, 1, Integer::sum);
    int common = 0;
    for (String w : a) {
      Integer n = bag.get(w);
      if (n != null && n > 0) {
        common++;
        bag.put(w, n - 1);
      }
    }
    if (common == 0) return 0.0;
    double p = (double) common / a.length;
    double r = (double) common / b.length;
    return 2 * p * r / (p + r);
  }

  /**
   * An answer as the report's exact match compares it with a reference: trimmed, white space collapsed,
   * final full stops dropped, lower-cased (the eval's rule for single answers).
   */
  public static String normalised(String s) {
    String t = String.join(" ", s.trim().split("\\s+"));
    while (t.endsWith(".")) t = t.substring(0, t.length() - 1);
    return t.trim().toLowerCase(Locale.ROOT);
  }

  /** Index of the first word where the two differ (the shorter length if one is a prefix); null when equal. */
  public static Integer firstDivergentToken(String x, String y) {
    String[] a = words(x);
    String[] b = words(y);
    int n = Math.min(a.length, b.length);
    for (int i = 0; i < n; i++) if (!a[i].equals(b[i])) return i;
    return a.length == b.length ? null : n;
  }
}
