package io.longsieve.eval;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Solves a suite document by reading it, without the generator: regular expressions built from
 * a family's templates find the needles and the question (tools/train/suite_oracle.py is the
 * Python twin). A document parses when the oracle's answer equals the document's expected items
 * — the check that Java- and Python-generated documents have the same format.
 */
final class SuiteOracle {

  private final SuiteText st;

  SuiteOracle(SuiteText st) {
    this.st = st;
  }

  private String words(String slot) {
    List<String> w = new ArrayList<>(st.words(st.isWordSlotOwn(slot) ? slot : slot.substring(0, slot.length() - 1)));
    w.sort(Comparator.comparingInt(String::length).reversed());
    return "(?:" + String.join("|", w.stream().map(Pattern::quote).toList()) + ")";
  }

  /** What a slot can hold, as a non-capturing pattern. */
  String slotPattern(String s) {
    switch (s) {
      case "key", "key_b": return words("keyadj") + "-" + words("keynoun");
      case "value": return "\\d{7}";
      case "var", "prev": return "[A-Z]{5}";
      case "title": return regex(st.needle("title"), List.of(), Map.of());
      case "fact": return regex(st.needle("fact"), List.of(), Map.of());
      case "min": return "\\d\\d";
      default: return st.isWordSlot(s) ? words(s) : "\\d+";
    }
  }

  /** The regex of one template; the slots in capture become groups, in template order. */
  String regex(String template, List<String> capture, Map<String, String> overrides) {
    StringBuilder b = new StringBuilder();
    Matcher m = SuiteText.slotPattern().matcher(template);
    int pos = 0;
    while (m.find()) {
      b.append(quote(template.substring(pos, m.start())));
      String p = overrides.getOrDefault(m.group(1), slotPattern(m.group(1)));
      b.append(capture.contains(m.group(1)) ? "(" + p + ")" : "(?:" + p + ")");
      pos = m.end();
    }
    return b.append(quote(template.substring(pos))).toString();
  }

  private static String quote(String s) {
    return s.isEmpty() ? "" : Pattern.quote(s);
  }

  /** Every match of any template, as slot -> text, one per position of the first captured slot, in text order. */
  List<Map<String, String>> matches(List<String> templates, List<String> slots, String text, Map<String, String> overrides) {
    TreeMap<Integer, Map<String, String>> found = new TreeMap<>();
    for (String t : templates) {
      List<String> names = SuiteText.slots(t).stream().filter(slots::contains).toList();
      Matcher m = Pattern.compile(regex(t, slots, overrides)).matcher(text);
      while (m.find()) {
        Map<String, String> got = new LinkedHashMap<>();
        for (int i = 0; i < names.size(); i++) got.put(names.get(i), m.group(i + 1));
        found.putIfAbsent(m.start(1 + names.indexOf(slots.get(0))), got);
      }
    }
    return new ArrayList<>(found.values());
  }

  /** Every needle template of the family as a pattern (for look-alike checks). */
  List<Pattern> needlePatterns() {
    List<String> ts = new ArrayList<>(st.kvNeedles());
    for (SuiteText.VtStyle v : st.vtStyles()) {
      ts.add(v.first());
      ts.add(v.next());
    }
    ts.addAll(st.summaryMarkers());
    return ts.stream().map(t -> Pattern.compile(regex(t, List.of(), Map.of()))).toList();
  }

  List<Pattern> questionPatterns() {
    List<Pattern> out = new ArrayList<>();
    for (String task : List.of("single", "multivalue", "multiquery", "vt", "mdqa")) {
      for (String q : st.questions(task)) out.add(Pattern.compile(regex(q, List.of(), Map.of())));
    }
    return out;
  }

  private Map<String, String> question(String task, String msg, List<String> slots) {
    String q = msg.substring(msg.lastIndexOf("Question: ") + "Question: ".length());
    for (String t : st.questions(task)) {
      List<String> names = SuiteText.slots(t).stream().filter(slots::contains).toList();
      Matcher m = Pattern.compile(regex(t, slots, Map.of())).matcher(q);
      if (m.find()) {
        Map<String, String> got = new LinkedHashMap<>();
        for (int i = 0; i < names.size(); i++) got.put(names.get(i), m.group(i + 1));
        return got;
      }
    }
    throw new AssertionError("no " + task + " question (" + st.family() + ") in " + q);
  }

  /** The answer items the document asks for, read from its user message alone. */
  List<String> solve(String kind, String msg) {
    String body = msg.contains("Question: ") ? msg.substring(0, msg.lastIndexOf("Question: ")) : msg;
    switch (kind) {
      case "niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery" -> {
        List<Map<String, String>> pairs = matches(st.kvNeedles(), List.of("value", "key"), body, Map.of());
        String task = kind.equals("niah_multivalue") ? "multivalue" : kind.equals("niah_multiquery") ? "multiquery" : "single";
        Map<String, String> q = question(task, msg, List.of("key", "key_b"));
        if (kind.equals("niah_multivalue")) {
          return pairs.stream().filter(p -> p.get("key").equals(q.get("key"))).map(p -> p.get("value")).toList();
        }
        List<String> keys = kind.equals("niah_multiquery") ? List.of(q.get("key"), q.get("key_b")) : List.of(q.get("key"));
        return keys.stream().map(k -> pairs.stream().filter(p -> p.get("key").equals(k)).findFirst()
            .orElseThrow(() -> new AssertionError("no needle for " + k)).get("value")).toList();
      }
      case "vt" -> {
        String value = question("vt", msg, List.of("value")).get("value");
        List<Map<String, String>> firsts = matches(st.vtStyles().stream().map(SuiteText.VtStyle::first).toList(),
            List.of("var", "value"), body, Map.of());
        List<Map<String, String>> nexts = matches(st.vtStyles().stream().map(SuiteText.VtStyle::next).toList(),
            List.of("var", "prev"), body, Map.of());
        List<String> chain = new ArrayList<>();
        for (Map<String, String> f : firsts) if (f.get("value").equals(value)) chain.add(f.get("var"));
        for (boolean grew = true; grew; ) {
          grew = false;
          for (Map<String, String> n : nexts) {
            if (n.get("prev").equals(chain.get(chain.size() - 1)) && !chain.contains(n.get("var"))) {
              chain.add(n.get("var"));
              grew = true;
            }
          }
        }
        return chain;
      }
      case "mdqa" -> {
        String title = question("mdqa", msg, List.of("title")).get("title");
        return List.of(matches(st.kvNeedles(), List.of("value", "key"), body, Map.of("key", slotPattern("title"))).stream()
            .filter(p -> p.get("key").equals(title)).findFirst().orElseThrow(() -> new AssertionError("no code for " + title))
            .get("value"));
      }
      case "summary" -> {
        return matches(st.summaryMarkers(), List.of("fact"), msg, Map.of()).stream().map(p -> p.get("fact")).toList();
      }
      default -> throw new IllegalArgumentException(kind);
    }
  }
}
