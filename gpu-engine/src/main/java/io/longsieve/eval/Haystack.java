package io.longsieve.eval;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Random;

/** Filler text with needles placed at depths; paragraphs of 3..7 sentences (suite.py's join_sentences / insert_needles). */
final class Haystack {
  private Haystack() {}

  /** nSentences filler sentences, needles inserted in order of depth (ties keep their order). */
  static List<String> withNeedles(SuiteText st, Random rng, int nSentences, List<SuiteGenerator.Needle> needles) {
    List<String> hay = new ArrayList<>(nSentences + needles.size());
    for (int i = 0; i < nSentences; i++) hay.add(st.sentence(rng));
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

  static String join(List<String> sentences, Random rng) {
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
}
