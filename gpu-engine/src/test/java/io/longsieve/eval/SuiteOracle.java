package io.longsieve.eval;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Solves a suite document by reading it, without the generator: the needles are found with
 * regular expressions written from the task formats. A document parses when the oracle's answer
 * equals the document's expected items — the check that Java- and Python-generated documents
 * have the same format.
 */
final class SuiteOracle {
  private SuiteOracle() {}

  static final Pattern NEEDLE = Pattern.compile("The special magic number for ([a-z]+-[a-z]+) is (\\d{7})\\.");
  static final Pattern Q_SINGLE = Pattern.compile("What is the special magic number for ([a-z]+-[a-z]+)\\?");
  static final Pattern Q_MULTIVALUE = Pattern.compile("What are all the special magic numbers for ([a-z]+-[a-z]+)\\?");
  static final Pattern Q_MULTIQUERY = Pattern.compile("What are the special magic numbers for ([a-z]+-[a-z]+) and ([a-z]+-[a-z]+)\\?");
  static final Pattern VT_FIRST = Pattern.compile("VAR ([A-Z]{5}) = (\\d{7})\\.");
  static final Pattern VT_NEXT = Pattern.compile("VAR ([A-Z]{5}) = VAR ([A-Z]{5})\\.");
  static final Pattern Q_VT = Pattern.compile("Which variables are assigned the value (\\d{7})\\?");
  static final Pattern CODE = Pattern.compile("The secret code of the (.+?) is (\\d{7})\\.");
  static final Pattern Q_CODE = Pattern.compile("What is the secret code of the (.+?)\\?");
  static final Pattern FACT = Pattern.compile("Key fact: ([^.]+\\.)");

  /** The answer items the document asks for, read from the user message alone. */
  static List<String> solve(String kind, String userMessage) {
    switch (kind) {
      case "niah_single", "niah_multikey" -> {
        String key = find(Q_SINGLE, userMessage).group(1);
        return List.of(values(userMessage).get(key).get(0));
      }
      case "niah_multivalue" -> {
        return values(userMessage).get(find(Q_MULTIVALUE, userMessage).group(1));
      }
      case "niah_multiquery" -> {
        Matcher q = find(Q_MULTIQUERY, userMessage);
        Map<String, List<String>> v = values(userMessage);
        return List.of(v.get(q.group(1)).get(0), v.get(q.group(2)).get(0));
      }
      case "vt" -> {
        String value = find(Q_VT, userMessage).group(1);
        List<String> chain = new ArrayList<>();
        Matcher m = VT_FIRST.matcher(userMessage);
        while (m.find()) if (m.group(2).equals(value)) chain.add(m.group(1));
        for (boolean grew = true; grew; ) {
          grew = false;
          Matcher n = VT_NEXT.matcher(userMessage);
          while (n.find()) {
            if (n.group(2).equals(chain.get(chain.size() - 1)) && !chain.contains(n.group(1))) {
              chain.add(n.group(1));
              grew = true;
            }
          }
        }
        return chain;
      }
      case "mdqa" -> {
        String title = find(Q_CODE, userMessage).group(1);
        Matcher m = CODE.matcher(userMessage);
        while (m.find()) if (m.group(1).equals(title)) return List.of(m.group(2));
        throw new AssertionError("no code for " + title);
      }
      case "summary" -> {
        List<String> facts = new ArrayList<>();
        Matcher m = FACT.matcher(userMessage);
        while (m.find()) facts.add(m.group(1));
        return facts;
      }
      default -> throw new IllegalArgumentException(kind);
    }
  }

  private static Map<String, List<String>> values(String text) {
    Map<String, List<String>> out = new HashMap<>();
    Matcher m = NEEDLE.matcher(text);
    while (m.find()) out.computeIfAbsent(m.group(1), k -> new ArrayList<>()).add(m.group(2));
    return out;
  }

  private static Matcher find(Pattern p, String text) {
    Matcher m = p.matcher(text);
    if (!m.find()) throw new AssertionError("no match for " + p + " in ..." + text.substring(Math.max(0, text.length() - 200)));
    return m;
  }
}
