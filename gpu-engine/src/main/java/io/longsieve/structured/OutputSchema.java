package io.longsieve.structured;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;

/**
 * A JSON Schema an output must follow, parsed and checked once where it comes in (a run's
 * {@code --json-schema}, a row's {@code json_schema}, a call's option): a value of this type always
 * compiles. It travels with requests (serializable, as its canonical text) and is compiled again on
 * the other side of the wire when first used. Equal canonical texts are equal schemas, which share
 * one mask cache per engine.
 */
public final class OutputSchema implements Serializable {

  private static final long serialVersionUID = 1L;
  private static final ObjectMapper JSON = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

  private final String canonical;
  private transient JsonNode tree;
  private transient SchemaNode root;

  private OutputSchema(String canonical, JsonNode tree, SchemaNode root) {
    this.canonical = canonical;
    this.tree = tree;
    this.root = root;
  }

  /**
   * Parses and compiles a schema.
   *
   * @throws SchemaException naming the keyword: malformed JSON (keyword null), a keyword outside the
   *     subset, a bad value, or a schema no value satisfies
   */
  public static OutputSchema parse(String text) {
    if (text == null || text.isBlank()) throw new SchemaException(null, null, "the JSON schema is empty");
    JsonNode tree;
    try {
      tree = JSON.readTree(text);
    } catch (JsonProcessingException e) {
      throw new SchemaException(null, null, "the JSON schema is not valid JSON: " + e.getOriginalMessage());
    }
    if (tree == null || !tree.isObject()) {
      throw new SchemaException(null, "#", "a JSON schema must be a JSON object");
    }
    return new OutputSchema(tree.toString(), tree, SchemaCompiler.compile(tree));
  }

  /** The schema as compact JSON text. */
  public String canonical() {
    return canonical;
  }

  /** The parsed schema (do not modify). */
  public synchronized JsonNode tree() {
    if (tree == null) {
      try {
        tree = JSON.readTree(canonical);
      } catch (JsonProcessingException e) {
        throw new IllegalStateException(e); // it parsed when made
      }
    }
    return tree;
  }

  synchronized SchemaNode root() {
    if (root == null) root = SchemaCompiler.compile(tree());
    return root;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof OutputSchema s && s.canonical.equals(canonical);
  }

  @Override
  public int hashCode() {
    return canonical.hashCode();
  }

  @Override
  public String toString() {
    return canonical;
  }
}
