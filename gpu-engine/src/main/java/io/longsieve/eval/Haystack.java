package io.longsieve.eval;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Random;

/**
 * Filler text of one haystack kind with needles placed at depths: sentences in paragraphs of 3..7,
 * or one line each (lists, tables, logs, code). suite.py's insert_needles / join_sentences.
 */
final class Haystack {
  private Haystack() {}

  /** nSentences filler sentences of the kind, needles inserted in order of depth (ties keep their order). */
  static List<String> withNeedles(SuiteText st, Random rng, SuiteText.HaystackKind kind, int nSentences,
      List<SuiteGenerator.Needle> needles) {
    List<String> hay = new ArrayList<>(nSentences + needles.size());
    for (int i = 0; i < nSentences; i++) hay.add(st.sentence(rng, kind));
    List<Integer> order = new ArrayList<>();
    for (int i = 0; i < needles.size(); i++) order.add(i);
    order.sort(Comparator.comparingDouble((Integer i) -> needles.get(i).depth()).thenComparingInt(i -> i));
    int shift = 0;
    for (int i : order) {
      int idx = Math.min(nSentences, (int) Math.round(needles.get(i).depth() * nSentences)) + shift;
      hay.add(idx, needles.get(i).text());
      shift++;
    }
    return hay;
  }

  static String join(List<String> sentences, Random rng, SuiteText.HaystackKind kind) {
    if (kind.lines()) return String.join("\n", sentences);
    StringBuilder b = new StringBuilder();
    int inPar = 0, parLen = SuiteText.between(rng, 3, 7);
    for (String s : sentences) {
      if (b.length() > 0) {
        if (inPar >= parLen) {
          b.append("\n\n");
          inPar = 0;
          parLen = SuiteText.between(rng, 3, 7);
        } else {
          b.append(' ');
        }
      }
      b.append(s);
      inPar++;
    }
    return b.toString();
  }

  /** The haystack of one document: filler of the kind with the needles, joined. */
  static String build(SuiteText st, Random rng, SuiteText.HaystackKind kind, int nSentences, List<SuiteGenerator.Needle> needles) {
    return join(withNeedles(st, rng, kind, nSentences, needles), rng, kind);
  }
}
