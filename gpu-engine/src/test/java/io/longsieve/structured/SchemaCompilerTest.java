package io.longsieve.structured;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Schemas outside the subset, or malformed, are refused in one line naming the keyword; the rest compile. */
class SchemaCompilerTest {

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "{\"type\":\"string\",\"format\":\"date\"}|format",
      "{\"allOf\":[{\"type\":\"string\"}]}|allOf",
      "{\"not\":{\"type\":\"string\"}}|not",
      "{\"type\":\"object\",\"patternProperties\":{\"a\":{\"type\":\"string\"}}}|patternProperties",
      "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":{\"type\":\"string\"}}|additionalProperties",
      "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"}]}|prefixItems",
      "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}|uniqueItems",
      "{\"type\":\"integer\",\"multipleOf\":3}|multipleOf",
      "{\"$ref\":\"http://example.com/s.json\"}|$ref",
      "{\"$ref\":\"#/$defs/missing\"}|$ref",
      "{\"type\":\"string\",\"pattern\":\"(?=a)b\"}|pattern",
      "{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}|pattern",
      "{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}|oneOf",
      "{\"type\":\"integer\",\"exclusiveMinimum\":true}|exclusiveMinimum",
      "{\"type\":\"date\"}|type",
      "{\"minLength\":3}|type",
      "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[\"b\"]}|required",
      "{\"type\":\"string\",\"minLength\":5,\"maxLength\":2}|minLength",
      "{\"enum\":[1,2],\"type\":\"string\"}|enum",
      "{\"enum\":[\"a\"],\"maxLength\":3}|maxLength",
      "{\"type\":\"array\"}|items"})
  void outsideTheSubsetIsRefusedNamingTheKeyword(String schema, String keyword) {
    SchemaException e = assertThrows(SchemaException.class, () -> OutputSchema.parse(schema));
    assertEquals(keyword, e.keyword(), e.getMessage());
    assertTrue(e.getMessage().contains("'" + keyword + "'"), e.getMessage());
    assertTrue(!e.getMessage().contains("\n"), "one line: " + e.getMessage());
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "{\"type\":\"object\"", "[1,2]", "''",
      "{\"type\":\"integer\",\"minimum\":5,\"maximum\":3}",
      "{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":0.0000001}",
      "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#/$defs/n\"}},\"required\":[\"n\"]}},\"$ref\":\"#/$defs/n\"}",
      "{\"type\":\"string\",\"pattern\":\"^[a-z]{10}$\",\"maxLength\":5}"})
  void malformedOrUnsatisfiableIsRefused(String schema) {
    SchemaException e = assertThrows(SchemaException.class, () -> OutputSchema.parse(schema));
    assertTrue(!e.getMessage().isBlank() && !e.getMessage().contains("\n"), e.getMessage());
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "{\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"},\"maxItems\":2}}}},\"$ref\":\"#/$defs/t\"}",
      "{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"}},\"required\":[\"k\"]},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"},\"v\":{\"type\":\"integer\"}},\"required\":[\"k\"]}]}",
      "{\"type\":[\"string\",\"null\"],\"maxLength\":3,\"description\":\"a note\",\"$schema\":\"https://json-schema.org/draft/2020-12/schema\"}",
      "{\"type\":\"string\",\"pattern\":\"^\\\\d{3}-[A-Z]+(xy)?z*$\"}"})
  void theSubsetCompiles(String schema) {
    assertTrue(OutputSchema.parse(schema).canonical().startsWith("{"));
  }

  /** A 50-property object compiles well under a second (the benchmark times it; here only that it compiles). */
  @org.junit.jupiter.api.Test
  void fiftyPropertiesCompile() {
    StringBuilder s = new StringBuilder("{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 50; i++) s.append(i == 0 ? "" : ",").append("\"field_").append(i).append("\":{\"type\":\"string\",\"maxLength\":20}");
    OutputSchema.parse(s.append("}}").toString());
  }

  /** NumberText's interval reasoning against plain enumeration of every number text it may write, within bounds. */
  @Test
  void numberPrefixesAreLiveExactlyWhenAValidNumberExtendsThem() {
    Random r = new Random(7);
    for (int trial = 0; trial < 40; trial++) {
      long lo = r.nextInt(41) - 20, hi = lo + r.nextInt(60);
      boolean exLo = r.nextBoolean(), exHi = r.nextBoolean();
      SchemaNode.NumberNode n = new SchemaNode.NumberNode("#", true, java.math.BigDecimal.valueOf(lo), exLo,
          java.math.BigDecimal.valueOf(hi), exHi);
      java.util.Set<String> texts = new java.util.HashSet<>();
      for (long v = -200; v <= 200; v++) {
        boolean in = (exLo ? v > lo : v >= lo) && (exHi ? v < hi : v <= hi);
        if (in) texts.add(Long.toString(v));
        if (in && v == 0) texts.add("-0");
      }
      java.util.Set<String> prefixes = new java.util.HashSet<>();
      for (String t : texts) for (int i = 0; i <= t.length(); i++) prefixes.add(t.substring(0, i));
      for (String p : new String[] {"", "-", "0", "-0", "1", "-1", "12", "-12", "5", "19", "-20", "100", "00", "1.", "7"}) {
        assertEquals(prefixes.contains(p), NumberText.live(n, p), "prefix '" + p + "' of [" + lo + "," + hi + "] ex " + exLo + exHi);
        assertEquals(texts.contains(p), NumberText.complete(n, p), "complete '" + p + "'");
      }
    }
  }
}
