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
 * The quality suite's text: word lists, haystack kinds, needle, question and answer formats and
 * the per-task prompt layout, from {@code suite-text.json} — the same file the Python
 * training-data generator (tools/train/suite.py) reads, so training and evaluation documents share
 * one format. {@link #loadHeldOut()} replaces the haystack kinds, needle phrasings and question
 * phrasings with those of {@code suite-heldout.json}, the family training never reads (word lists,
 * answer formats and prompts stay). Slot rules are the ones the file's "about" field lists.
 */
public final class SuiteText {

  private static final Pattern SLOT = Pattern.compile("\\{([a-z0-9_]+)\\}");
  private static final String LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  public static final String TRAINING_FILE = "suite-text.json";
  public static final String HELD_OUT_FILE = "suite-heldout.json";

  /** A haystack kind: its sentence (or line) templates and whether they join into paragraphs or lines. */
  public record HaystackKind(String name, boolean lines, List<String> templates) {}

  /** A variable-tracking style: the first assignment (of the value) and the next ones (of a variable). */
  public record VtStyle(String first, String next) {}

  private final String family;
  private final Map<String, List<String>> words = new LinkedHashMap<>();
  private final Map<String, HaystackKind> haystack = new LinkedHashMap<>();
  private final List<String> kvNeedles = new ArrayList<>();
  private final List<VtStyle> vtStyles = new ArrayList<>();
  private final List<String> summaryMarkers = new ArrayList<>();
  private final Map<String, String> needles = new HashMap<>();
  private final Map<String, List<String>> questions = new LinkedHashMap<>();
  private final Map<String, String> prompts = new HashMap<>();
  private final Map<String, String> answers = new HashMap<>();

  /** family: the training text, or the training text with the held-out file's haystack, needles and questions. */
  SuiteText(JsonNode training, JsonNode heldOut) {
    JsonNode fam = heldOut == null ? training : heldOut;
    family = heldOut == null ? "train" : "heldout";
    training.path("words").fields().forEachRemaining(e -> words.put(e.getKey(), strings(e.getValue())));
    fam.path("haystack").fields().forEachRemaining(e -> haystack.put(e.getKey(), new HaystackKind(e.getKey(),
        e.getValue().path("join").asText().equals("lines"), strings(e.getValue().path("templates")))));
    JsonNode n = fam.path("needles");
    kvNeedles.addAll(strings(n.path("kv")));
    n.path("vt").forEach(v -> vtStyles.add(new VtStyle(v.path("first").asText(), v.path("next").asText())));
    summaryMarkers.addAll(strings(n.path("summary")));
    needles.put("fact", n.path("fact").asText(null));
    needles.put("title", n.path("title").asText(null));
    fam.path("questions").fields().forEachRemaining(e -> questions.put(e.getKey(), strings(e.getValue())));
    copy(training.path("prompts"), prompts);
    copy(training.path("answers"), answers);
    if (haystack.isEmpty() || kvNeedles.isEmpty() || vtStyles.isEmpty() || summaryMarkers.isEmpty()) {
      throw new IllegalStateException("suite text (" + family + "): haystack kinds, kv, vt and summary needles are required");
    }
  }

  private static List<String> strings(JsonNode array) {
    List<String> l = new ArrayList<>();
    array.forEach(x -> l.add(x.asText()));
    return List.copyOf(l);
  }

  private static void copy(JsonNode node, Map<String, String> into) {
    node.fields().forEachRemaining(e -> into.put(e.getKey(), e.getValue().asText()));
  }

  static JsonNode resource(String name) {
    try (InputStream in = SuiteText.class.getResourceAsStream(name)) {
      if (in == null) throw new IllegalStateException(name + " missing from the classpath");
      return new ObjectMapper().readTree(in);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The bundled training family (suite-text.json). */
  public static SuiteText load() {
    return new SuiteText(resource(TRAINING_FILE), null);
  }

  /** The bundled held-out family: suite-heldout.json's phrasings and haystacks, suite-text.json's words, answers and prompts. */
  public static SuiteText loadHeldOut() {
    return new SuiteText(resource(TRAINING_FILE), resource(HELD_OUT_FILE));
  }

  /** "train" or "heldout". */
  public String family() {
    return family;
  }

  /** "fact" or "title": the templates of a summary fact and of a document title. */
  public String needle(String name) {
    String v = needles.get(name);
    if (v == null) throw new IllegalArgumentException("suite text: no needles." + name);
    return v;
  }

  public List<String> kvNeedles() {
    return List.copyOf(kvNeedles);
  }

  public List<VtStyle> vtStyles() {
    return List.copyOf(vtStyles);
  }

  public List<String> summaryMarkers() {
    return List.copyOf(summaryMarkers);
  }

  /** The question phrasings of a task: single, multivalue, multiquery, vt, mdqa. */
  public List<String> questions(String task) {
    List<String> q = questions.get(task);
    if (q == null || q.isEmpty()) throw new IllegalArgumentException("suite text: no questions." + task);
    return q;
  }

  public List<HaystackKind> haystackKinds() {
    return List.copyOf(haystack.values());
  }

  public HaystackKind haystackKind(String name) {
    HaystackKind k = haystack.get(name);
    if (k == null) throw new IllegalArgumentException("suite text: no haystack kind " + name + "; known: " + haystack.keySet());
    return k;
  }

  public List<String> words(String list) {
    List<String> w = words.get(list);
    if (w == null) throw new IllegalArgumentException("suite text: no word list " + list);
    return w;
  }

  /** Whether the slot names a word list itself ({noun}); {@link #isWordSlot} also takes a second pick ({noun2}). */
  public boolean isWordSlotOwn(String slot) {
    return words.containsKey(slot);
  }

  public boolean isWordSlot(String slot) {
    return words.containsKey(slot) || (slot.endsWith("2") && words.containsKey(slot.substring(0, slot.length() - 1)));
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

  /** The slots of a template, in order ({key}, {value}, word lists...). */
  public static List<String> slots(String template) {
    List<String> out = new ArrayList<>();
    Matcher m = SLOT.matcher(template);
    while (m.find()) out.add(m.group(1));
    return out;
  }

  static Pattern slotPattern() {
    return SLOT;
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

  static <T> T pick(List<T> l, Random rng) {
    return l.get(rng.nextInt(l.size()));
  }

  public String sentence(Random rng, HaystackKind kind) {
    return fill(pick(kind.templates(), rng), rng);
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

}
