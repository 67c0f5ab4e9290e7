package io.longsieve.eval;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The quality suite's text: haystack sentence templates, word lists, needle, question and answer
 * templates and the per-task prompt layout, from {@code suite-text.json} — the same file the
 * Python training-data generator (tools/train/suite.py) reads, so training and evaluation
 * documents share one format. Slot rules are the ones that file's "about" field lists.
 */
public final class SuiteText {

  private static final Pattern SLOT = Pattern.compile("\\{([a-z0-9_]+)\\}");
  private static final String LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  /** Phrases only needles carry; the haystack never contains them. */
  public static final List<String> MARKERS = List.of("special magic number", "VAR ", "secret code", "Key fact");

  private final Map<String, List<String>> words = new LinkedHashMap<>();
  private final List<String> haystack = new ArrayList<>();
  private final Map<String, String> needles = new HashMap<>();
  private final Map<String, String> questions = new HashMap<>();
  private final Map<String, String> prompts = new HashMap<>();
  private final Map<String, String> answers = new HashMap<>();

  private SuiteText(JsonNode root) {
    root.path("words").fields().forEachRemaining(e -> {
      List<String> l = new ArrayList<>();
      e.getValue().forEach(n -> l.add(n.asText()));
      words.put(e.getKey(), List.copyOf(l));
    });
    root.path("haystack").forEach(n -> haystack.add(n.asText()));
    copy(root.path("needles"), needles);
    copy(root.path("questions"), questions);
    copy(root.path("prompts"), prompts);
    copy(root.path("answers"), answers);
  }

  private static void copy(JsonNode node, Map<String, String> into) {
    node.fields().forEachRemaining(e -> into.put(e.getKey(), e.getValue().asText()));
  }

  /** The bundled suite-text.json. */
  public static SuiteText load() {
    try (InputStream in = SuiteText.class.getResourceAsStream("suite-text.json")) {
      if (in == null) throw new IllegalStateException("suite-text.json missing from the classpath");
      return new SuiteText(new ObjectMapper().readTree(in));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public String needle(String name) {
    return get(needles, "needles", name);
  }

  public String question(String name) {
    return get(questions, "questions", name);
  }

  public String prompt(String name) {
    return get(prompts, "prompts", name);
  }

  public String answer(String name) {
    return get(answers, "answers", name);
  }

  private static String get(Map<String, String> m, String section, String name) {
    String v = m.get(name);
    if (v == null) throw new IllegalArgumentException("suite-text.json: no " + section + "." + name);
    return v;
  }

  /** Fills a template: given slots first, then word lists and numeric slots; a slot used twice in one template gets one value. */
  public String fill(String template, Random rng, Map<String, String> given) {
    Map<String, String> picked = new HashMap<>();
    Matcher m = SLOT.matcher(template);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      String s = m.group(1);
      String v = given.containsKey(s) ? given.get(s) : picked.computeIfAbsent(s, k -> slot(k, rng));
      m.appendReplacement(out, Matcher.quoteReplacement(v));
    }
    m.appendTail(out);
    return out.toString();
  }

  public String fill(String template, Random rng) {
    return fill(template, rng, Map.of());
  }

  private String slot(String s, Random rng) {
    if (words.containsKey(s)) return pick(words.get(s), rng);
    if (s.endsWith("2") && words.containsKey(s.substring(0, s.length() - 1))) {
      return pick(words.get(s.substring(0, s.length() - 1)), rng);
    }
    switch (s) {
      case "n": return Integer.toString(between(rng, 2, 60));
      case "n3": return Integer.toString(between(rng, 100, 999));
      case "pct": return Integer.toString(between(rng, 1, 99));
      case "year": return Integer.toString(between(rng, 1950, 2030));
      case "day": return Integer.toString(between(rng, 1, 28));
      case "hour": return Integer.toString(between(rng, 6, 22));
      case "min": return pick(List.of("00", "15", "30", "45"), rng);
      default: throw new IllegalArgumentException("suite-text.json: unknown slot {" + s + "}");
    }
  }

  static int between(Random rng, int lo, int hi) {
    return lo + rng.nextInt(hi - lo + 1);
  }

  static String pick(List<String> l, Random rng) {
    return l.get(rng.nextInt(l.size()));
  }

  public String sentence(Random rng) {
    return fill(pick(haystack, rng), rng);
  }

  public String key(Random rng) {
    return pick(words.get("keyadj"), rng) + "-" + pick(words.get("keynoun"), rng);
  }

  public static String value(Random rng) {
    return Integer.toString(between(rng, 1_000_000, 9_999_999));
  }

  public static String variable(Random rng) {
    StringBuilder b = new StringBuilder(5);
    for (int i = 0; i < 5; i++) b.append(LETTERS.charAt(rng.nextInt(LETTERS.length())));
    return b.toString();
  }

  int haystackTemplates() {
    return haystack.size();
  }
}
