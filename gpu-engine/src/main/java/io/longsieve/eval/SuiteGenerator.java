package io.longsieve.eval;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.function.Function;
import java.util.function.ToIntFunction;

/**
 * Makes suite documents: RULER-style tasks in generated haystacks, at a target prompt length in
 * tokens. The Java port of tools/train/suite.py's Generator — same templates (the SuiteText's
 * family: suite-text.json, or suite-heldout.json's phrasings and haystacks), same task layouts;
 * each document draws its haystack kind, question phrasing and (per needle) needle phrasings.
 * Java's and Python's random streams differ, so the documents are different draws of the same
 * distribution, not the same text. Deterministic for a given seed, target and token counter.
 */
public final class SuiteGenerator {

  public static final List<String> KINDS = List.of(
      "niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "vt", "mdqa", "summary");

  private final SuiteText st;
  private final TaskPrompts prompts;
  private final ToIntFunction<String> countTokens;  // user message -> tokens

  public SuiteGenerator(SuiteText st, ToIntFunction<String> countTokens) {
    this.st = st;
    this.prompts = new TaskPrompts(st);
    this.countTokens = countTokens;
  }

  public static String taskOf(String kind) {
    switch (kind) {
      case "mdqa": return "multi_doc_qa";
      case "summary": return "summary";
      default:
        if (!KINDS.contains(kind)) throw new IllegalArgumentException("unknown suite task '" + kind + "'; known: " + KINDS);
        return "qa";
    }
  }

  /**
   * One item whose user message is at most {@code targetTokens} long (and within ~7% of it), with
   * the asked-about needle at {@code depth}; {@code nFacts} facts for the summary.
   */
  public SuiteItem make(String kind, long seed, int targetTokens, double depth, int nFacts) {
    int n = Math.max(4, targetTokens / 16);
    SuiteItem best = null;
    for (int attempt = 0; attempt < 8; attempt++) {
      SuiteItem it = build(kind, seed, n, depth, nFacts);
      int used = countTokens.applyAsInt(prompts.userMessage(it));
      if (used <= targetTokens) {
        best = with(it, targetTokens, used);
        if (used >= 0.93 * targetTokens) break;
      }
      int next = Math.max(4, (int) ((long) n * targetTokens * 0.97 / used));
      if (next == n) next = used > targetTokens ? n - 1 : n + 1;
      if (next < 4) break;
      n = next;
    }
    if (best == null) {
      SuiteItem it = build(kind, seed, 4, depth, nFacts);
      best = with(it, targetTokens, countTokens.applyAsInt(prompts.userMessage(it)));
    }
    String prefix = st.family().equals("train") ? "" : st.family() + "-";
    return best.withDocId(prefix + kind + "-" + targetTokens + "-" + seed);
  }

  private static SuiteItem with(SuiteItem it, int length, int used) {
    return new SuiteItem(it.docId(), it.task(), it.kind(), it.text(), it.documents(), it.question(), it.reference(),
        it.expected(), it.depth(), length, used);
  }

  /** The item's parts for a given haystack size; haystack kind, needles, phrasings and questions depend on the seed only. */
  SuiteItem build(String kind, long seed, int nSent, double depth, int nFacts) {
    Random rng = new Random(seed * 1_000_003L + nSent);
    Random content = new Random(seed * 7919L + 17);
    SuiteText.HaystackKind hay = SuiteText.pick(st.haystackKinds(), content);
    String task = taskOf(kind);
    String text = null, question = null, reference;
    List<SuiteItem.Document> docs = List.of();
    List<String> expected;
    double d = depth;
    switch (kind) {
      case "niah_single":
      case "niah_multikey":
      case "niah_multiquery": {
        int nKeys = kind.equals("niah_single") ? 1 : 4;
        List<String> keys = distinct(content, st::key, nKeys);
        List<String> values = distinct(content, SuiteText::value, nKeys);
        List<Needle> needles = new ArrayList<>();
        for (int i = 0; i < nKeys; i++) {
          needles.add(new Needle(i == 0 ? depth : content.nextDouble(), kv(content, rng, keys.get(i), values.get(i))));
        }
        if (kind.equals("niah_multiquery")) {
          int[] asked = {0, 1 + content.nextInt(nKeys - 1)};
          question = st.fill(SuiteText.pick(st.questions("multiquery"), content), rng,
              Map.of("key", keys.get(asked[0]), "key_b", keys.get(asked[1])));
          expected = List.of(values.get(asked[0]), values.get(asked[1]));
          List<String> parts = new ArrayList<>();
          for (int i : asked) parts.add(answer(keys.get(i), values.get(i)));
          reference = String.join(st.answer("multiquery_separator"), parts);
        } else {
          question = st.fill(SuiteText.pick(st.questions("single"), content), rng, Map.of("key", keys.get(0)));
          expected = List.of(values.get(0));
          reference = answer(keys.get(0), values.get(0));
        }
        text = Haystack.build(st, rng, hay, nSent, needles);
        break;
      }
      case "niah_multivalue": {
        String key = st.key(content);
        List<String> values = distinct(content, SuiteText::value, 4);
        List<Double> depths = new ArrayList<>(List.of(depth, content.nextDouble(), content.nextDouble(), content.nextDouble()));
        depths.sort(Comparator.naturalOrder());
        List<Needle> needles = new ArrayList<>();
        for (int i = 0; i < 4; i++) needles.add(new Needle(depths.get(i), kv(content, rng, key, values.get(i))));
        question = st.fill(SuiteText.pick(st.questions("multivalue"), content), rng, Map.of("key", key));
        expected = values;
        reference = st.fill(st.answer("multivalue"), rng, Map.of("key", key, "values", String.join(st.answer("list_separator"), values)));
        text = Haystack.build(st, rng, hay, nSent, needles);
        break;
      }
      case "vt": {
        List<String> vals = distinct(content, SuiteText::value, 2);
        List<String> names = distinct(content, r -> SuiteText.variable(r), 10);
        SuiteText.VtStyle style = SuiteText.pick(st.vtStyles(), content);
        List<Needle> needles = new ArrayList<>();
        for (int c = 0; c < 2; c++) {
          List<String> vars = names.subList(c * 5, c * 5 + 5);
          double lo = c == 0 ? depth * 0.5 : 0.0;
          List<Double> ds = new ArrayList<>();
          for (int i = 0; i < 5; i++) ds.add(lo + (1 - lo) * content.nextDouble());
          ds.sort(Comparator.naturalOrder());
          if (c == 0) ds.set(0, depth * 0.5);
          for (int i = 0; i < 5; i++) {
            String t = i == 0
                ? st.fill(style.first(), rng, Map.of("var", vars.get(i), "value", vals.get(c)))
                : st.fill(style.next(), rng, Map.of("var", vars.get(i), "prev", vars.get(i - 1)));
            needles.add(new Needle(ds.get(i), t));
          }
        }
        question = st.fill(SuiteText.pick(st.questions("vt"), content), rng, Map.of("value", vals.get(0)));
        expected = List.copyOf(names.subList(0, 5));
        reference = String.join(st.answer("list_separator"), expected);
        text = Haystack.build(st, rng, hay, nSent, needles);
        break;
      }
      case "mdqa": {
        int nDocs = Math.max(2, Math.min(12, nSent / 25));
        List<String> titles = distinct(content, r -> st.fill(st.needle("title"), r), nDocs);
        List<String> values = distinct(content, SuiteText::value, nDocs);
        int target = Math.min(nDocs - 1, (int) (depth * nDocs));
        int per = Math.max(3, nSent / nDocs);
        List<SuiteItem.Document> list = new ArrayList<>();
        for (int i = 0; i < nDocs; i++) {
          String fact = kv(content, rng, titles.get(i), values.get(i));
          list.add(new SuiteItem.Document(titles.get(i),
              Haystack.build(st, rng, hay, per, List.of(new Needle(content.nextDouble(), fact)))));
        }
        docs = list;
        question = st.fill(SuiteText.pick(st.questions("mdqa"), content), rng, Map.of("title", titles.get(target)));
        expected = List.of(values.get(target));
        reference = st.fill(st.answer("mdqa"), rng, Map.of("title", titles.get(target), "value", values.get(target)));
        d = (double) target / Math.max(1, nDocs - 1);
        break;
      }
      case "summary": {
        String marker = SuiteText.pick(st.summaryMarkers(), content);
        List<String> facts = new ArrayList<>();
        while (facts.size() < nFacts) {
          String f = st.fill(st.needle("fact"), content);
          if (!facts.contains(f)) facts.add(f);
        }
        List<Double> depths = new ArrayList<>();
        depths.add(depth);
        for (int i = 1; i < nFacts; i++) depths.add(content.nextDouble());
        depths.sort(Comparator.naturalOrder());
        List<Needle> needles = new ArrayList<>();
        for (int i = 0; i < nFacts; i++) needles.add(new Needle(depths.get(i), st.fill(marker, rng, Map.of("fact", facts.get(i)))));
        text = Haystack.build(st, rng, hay, nSent, needles);
        expected = facts;
        reference = String.join(st.answer("summary_separator"), facts);
        break;
      }
      default:
        throw new IllegalArgumentException("unknown suite task '" + kind + "'; known: " + KINDS);
    }
    return new SuiteItem(null, task, kind, text, docs, question, reference, expected, d, 0, 0);
  }

  /** A key-value needle in a phrasing drawn per needle. */
  private String kv(Random content, Random rng, String key, String value) {
    return st.fill(SuiteText.pick(st.kvNeedles(), content), rng, Map.of("key", key, "value", value));
  }

  /** The answer for one key: the key as the question gives it, and the value. */
  private String answer(String key, String value) {
    return st.fill(st.answer("single"), null, Map.of("key", key, "value", value));
  }

  /** The family the documents come from ("train" or "heldout"). */
  public String family() {
    return st.family();
  }

  static <T> List<T> distinct(Random rng, Function<Random, T> make, int n) {
    Set<T> seen = new HashSet<>();
    List<T> out = new ArrayList<>();
    while (out.size() < n) {
      T v = make.apply(rng);
      if (seen.add(v)) out.add(v);
    }
    return out;
  }

  /** A needle sentence and where it goes (0..1). */
  record Needle(double depth, String text) {}
}
