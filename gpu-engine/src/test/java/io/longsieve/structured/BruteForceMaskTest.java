package io.longsieve.structured;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The mask engine against brute force on a small vocabulary: for schemas whose documents (without
 * whitespace: the vocabulary has none) can all be listed, the documents are enumerated here by plain
 * recursion, each checked by the networknt validator; then at every prefix the tokens reach, the
 * engine's mask must be exactly the tokens that keep the text a prefix of a listed document, plus
 * EOS where the text is one.
 */
class BruteForceMaskTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  /** Token texts of the test vocabulary (UTF-8); two tokens split the two bytes of 'é'. */
  static final List<String> TOKENS = List.of("{", "}", "[", "]", "\"", ":", ",", "a", "b", "x", "y", "0", "1", "2", "-",
      ".", "{\"", "\":", "\"a\"", "12", "],\"", "x\"", "\"x", "true", "tr", "ue", "false", "null", "nu", "ll", "é", "\"ab",
      "-0", "\"b\":[", "ab");
  static final int EOS = TOKENS.size() + 2;  // two ids past the tokens: a gap, an unused id, then EOS
  static final int SIZE = EOS + 1;

  static TokenVocabulary vocabulary() {
    byte[][] bytes = new byte[SIZE][];
    for (int i = 0; i < TOKENS.size(); i++) bytes[i] = TOKENS.get(i).getBytes(StandardCharsets.UTF_8);
    bytes[TOKENS.size()] = new byte[] {(byte) 0xc3};      // 'é' split
    bytes[TOKENS.size() + 1] = new byte[] {(byte) 0xa9};
    return new TokenVocabulary(bytes, Set.of(EOS));
  }

  @ParameterizedTest
  @ValueSource(strings = {
      "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":-2,\"maximum\":12},"
          + "\"b\":{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\"]},\"maxItems\":2}},\"required\":[\"a\"],"
          + "\"additionalProperties\":false}",
      "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"null\"},{\"type\":\"boolean\"}]}",
      "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"^(ab|x|é)$\"},\"minItems\":1,\"maxItems\":2}",
      "{\"$defs\":{\"n\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":2}},\"type\":\"object\",\"properties\":"
          + "{\"x\":{\"$ref\":\"#/$defs/n\"},\"y\":{\"$ref\":\"#/$defs/n\"}},\"additionalProperties\":false}",
      "{\"type\":\"string\",\"pattern\":\"b\",\"minLength\":1,\"maxLength\":3}",
      "{\"oneOf\":[{\"const\":12},{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-1,\"maximum\":1},"
          + "\"maxItems\":3}]}"})
  void masksEqualBruteForce(String schemaText) throws Exception {
    TokenVocabulary vocab = vocabulary();
    SchemaOracle oracle = new SchemaOracle(schemaText);
    Set<String> docs = documents(JSON.readTree(schemaText), JSON.readTree(schemaText));
    for (String d : docs) assertTrue(oracle.valid(d), "the enumerator listed an invalid document: " + d);
    Set<String> prefixes = new HashSet<>();
    for (String d : docs) for (int i = 0; i <= bytesOf(d).length; i++) prefixes.add(latin(bytesOf(d), i));
    Set<String> whole = new HashSet<>();
    for (String d : docs) whole.add(latin(bytesOf(d), bytesOf(d).length));

    TokenMasks masks = new StructuredOutput(vocab).masks(OutputSchema.parse(schemaText));
    ArrayDeque<Object[]> todo = new ArrayDeque<>(); // (prefix as latin-1 text, entry)
    todo.add(new Object[] {"", masks.start()});
    Set<String> seen = new HashSet<>();
    int checked = 0;
    while (!todo.isEmpty()) {
      Object[] at = todo.poll();
      String prefix = (String) at[0];
      TokenMasks.Entry e = (TokenMasks.Entry) at[1];
      if (!seen.add(prefix)) continue;
      BitSet brute = new BitSet();
      for (int id = 0; id < SIZE; id++) {
        byte[] b = vocab.bytes(id);
        if (b != null && prefixes.contains(prefix + latin(b, b.length))) brute.set(id);
      }
      if (whole.contains(prefix)) brute.set(EOS);
      BitSet engine = BitSet.valueOf(masks.allowed(e));
      assertEquals(brute, engine, "mask after '" + new String(prefix.getBytes(StandardCharsets.ISO_8859_1), StandardCharsets.UTF_8) + "'");
      assertEquals(whole.contains(prefix) && brute.cardinality() == 1, masks.complete(e), "complete at " + prefix);
      checked++;
      for (int id = engine.nextSetBit(0); id >= 0; id = engine.nextSetBit(id + 1)) {
        if (id == EOS) continue;
        byte[] b = vocab.bytes(id);
        todo.add(new Object[] {prefix + latin(b, b.length), masks.advance(e, id)});
      }
    }
    assertTrue(checked > 5, "prefixes checked: " + checked);
  }

  private static byte[] bytesOf(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private static String latin(byte[] b, int n) {
    return new String(b, 0, n, StandardCharsets.ISO_8859_1);
  }

  /** Characters a string may hold with this vocabulary (no escapes: the vocabulary has no backslash). */
  static final List<String> STRING_CHARS = List.of("{", "}", "[", "]", ":", ",", "a", "b", "x", "y", "0", "1", "2", "-",
      ".", "t", "r", "u", "e", "f", "l", "s", "n", "é");

  /** Every compact document of a schema (properties in order), by plain recursion over its keywords. */
  static Set<String> documents(JsonNode s, JsonNode root) {
    Set<String> out = new LinkedHashSet<>();
    if (s.has("$ref")) return documents(root.at(s.get("$ref").asText().substring(1)), root);
    if (s.has("anyOf") || s.has("oneOf")) {
      for (JsonNode alt : s.has("anyOf") ? s.get("anyOf") : s.get("oneOf")) out.addAll(documents(alt, root));
      return out;
    }
    if (s.has("const")) {
      out.add(s.get("const").toString());
      return out;
    }
    if (s.has("enum")) {
      for (JsonNode v : s.get("enum")) out.add(v.toString());
      return out;
    }
    switch (s.get("type").asText()) {
      case "null" -> out.add("null");
      case "boolean" -> {
        out.add("true");
        out.add("false");
      }
      case "integer" -> {
        long min = s.get("minimum").asLong(), max = s.get("maximum").asLong();
        for (long v = min; v <= max; v++) out.add(Long.toString(v));
        if (min <= 0 && max >= 0) out.add("-0");
      }
      case "string" -> {
        int min = s.path("minLength").asInt(0), max = s.get("maxLength") == null ? 2 : s.get("maxLength").asInt();
        Pattern p = s.has("pattern") ? Pattern.compile(s.get("pattern").asText()) : null;
        List<String> all = new ArrayList<>(List.of(""));
        for (int len = 1, from = 0; len <= max; len++) {
          int to = all.size();
          for (int i = from; i < to; i++) for (String c : STRING_CHARS) all.add(all.get(i) + c);
          from = to;
        }
        for (String v : all) {
          if (v.codePointCount(0, v.length()) >= min && (p == null || p.matcher(v).find())) out.add("\"" + v + "\"");
        }
      }
      case "array" -> {
        Set<String> items = documents(s.get("items"), root);
        int min = s.path("minItems").asInt(0), max = s.path("maxItems").asInt();
        List<String> seqs = new ArrayList<>(List.of(""));
        for (int n = 0, from = 0; n <= max; n++) {
          int to = seqs.size();
          if (n >= min) for (int i = from; i < to; i++) out.add("[" + seqs.get(i) + "]");
          for (int i = from; i < to; i++) for (String it : items) seqs.add(seqs.get(i) + (n == 0 ? "" : ",") + it);
          from = to;
        }
      }
      case "object" -> {
        List<String> names = new ArrayList<>();
        for (Iterator<String> it = s.get("properties").fieldNames(); it.hasNext(); ) names.add(it.next());
        Set<String> required = new HashSet<>();
        s.path("required").forEach(r -> required.add(r.asText()));
        Map<String, Set<String>> values = new HashMap<>();
        for (String n : names) values.put(n, documents(s.get("properties").get(n), root));
        List<String> bodies = new ArrayList<>(List.of(""));
        for (String n : names) {
          List<String> next = new ArrayList<>();
          for (String b : bodies) {
            if (!required.contains(n)) next.add(b);
            for (String v : values.get(n)) next.add(b + (b.isEmpty() ? "" : ",") + "\"" + n + "\":" + v);
          }
          bodies = next;
        }
        for (String b : bodies) out.add("{" + b + "}");
      }
      default -> throw new IllegalArgumentException(s.toString());
    }
    return out;
  }
}
