package io.longsieve.eval;

import java.util.List;
import java.util.Locale;

/**
 * Scores one answer against the expected items (the Python twin is tools/train/suite.py#score):
 * <ul>
 *   <li>one expected item (niah_single, niah_multikey, mdqa): exact match, 1 or 0, of the whole
 *       output against the reference sentence or the bare value, after trimming, collapsing
 *       whitespace, dropping a final full stop and lower-casing;</li>
 *   <li>a list (multi-value, multi-query, variable tracking): the fraction of expected items that
 *       occur in the output;</li>
 *   <li>the summary: in-order recall — facts found one after another, each after the previous
 *       one, over the number of facts.</li>
 * </ul>
 */
public final class Scoring {
  private Scoring() {}

  public static double score(String kind, List<String> expected, String output, String reference) {
    String out = collapse(output).toLowerCase(Locale.ROOT);
    if (expected.size() == 1 && !kind.equals("summary")) {
      String got = normalise(output);
      boolean ok = got.equals(normalise(expected.get(0))) || (reference != null && got.equals(normalise(reference)));
      return ok ? 1.0 : 0.0;
    }
    if (kind.equals("summary")) {
      int pos = 0, hits = 0;
      for (String e : expected) {
        String f = collapse(e).toLowerCase(Locale.ROOT);
        int i = out.indexOf(f, pos);
        if (i >= 0) {
          hits++;
          pos = i + f.length();
        }
      }
      return (double) hits / expected.size();
    }
    int hits = 0;
    for (String e : expected) if (out.contains(e.toLowerCase(Locale.ROOT))) hits++;
    return (double) hits / expected.size();
  }

  public static double score(SuiteItem item, String output) {
    return score(item.kind(), item.expected(), output, item.reference());
  }

  static String collapse(String s) {
    return String.join(" ", s.trim().split("\\s+"));
  }

  static String normalise(String s) {
    String t = collapse(s);
    while (t.endsWith(".")) t = t.substring(0, t.length() - 1);
    return t.trim().toLowerCase(Locale.ROOT);
  }
}
