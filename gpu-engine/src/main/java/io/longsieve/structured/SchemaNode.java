package io.longsieve.structured;

import dk.brics.automaton.RunAutomaton;
import java.math.BigDecimal;
import java.util.List;

/**
 * A compiled sub-schema of the supported subset (docs/structured-output.md), the grammar
 * {@link JsonMatcher} walks. Nodes form a graph, not a tree: a {@code $ref} may point back up, and
 * {@link #minDepth} (filled in by {@link SchemaCompiler}) says how many nested objects and arrays the
 * shallowest value of the node needs, so the matcher never enters a branch it cannot close within
 * {@link JsonMatcher#MAX_DEPTH}. Identity is object identity: a node is compiled once per schema.
 */
abstract sealed class SchemaNode {

  static final int INFEASIBLE = Integer.MAX_VALUE / 2;

  /** JSON pointer of the sub-schema, for messages. */
  final String path;
  /** Nesting of the shallowest value; {@link #INFEASIBLE} when no value satisfies the node. */
  int minDepth = INFEASIBLE;

  SchemaNode(String path) {
    this.path = path;
  }

  /** One declared property: its key as the canonical JSON string literal the output writes. */
  record Property(String name, byte[] keyLiteral, SchemaNode node, boolean required) {}

  /** An object whose properties come in declared order; optional ones may be left out. */
  static final class ObjectNode extends SchemaNode {
    final List<Property> properties;

    ObjectNode(String path, List<Property> properties) {
      super(path);
      this.properties = properties;
    }

    /** Index of the first required property at or after {@code from}, else the last index: keys offered next. */
    int lastCandidate(int from) {
      for (int p = from; p < properties.size(); p++) if (properties.get(p).required()) return p;
      return properties.size() - 1;
    }

    /** Whether a required property comes at or after {@code from} (the object cannot close yet). */
    boolean requiresFrom(int from) {
      for (int p = from; p < properties.size(); p++) if (properties.get(p).required()) return true;
      return false;
    }
  }

  /** An array of {@code items}, between minItems and maxItems of them. */
  static final class ArrayNode extends SchemaNode {
    final SchemaNode items;
    final int minItems;
    final int maxItems;

    ArrayNode(String path, SchemaNode items, int minItems, int maxItems) {
      super(path);
      this.items = items;
      this.minItems = minItems;
      this.maxItems = maxItems;
    }
  }

  /**
   * A string of minLength to maxLength code points; with a pattern, its DFA (over UTF-16 units,
   * surrogates excluded, so each step is one code point) and what its states can still reach.
   */
  static final class StringNode extends SchemaNode {
    final int minLength;
    final int maxLength;          // Integer.MAX_VALUE: none
    final RunAutomaton pattern;   // null: any text
    final PatternReach reach;     // null without a pattern

    StringNode(String path, int minLength, int maxLength, RunAutomaton pattern) {
      super(path);
      this.minLength = minLength;
      this.maxLength = maxLength;
      this.pattern = pattern;
      this.reach = pattern == null ? null : new PatternReach(pattern, minLength, maxLength);
    }

    /** Whether the length must be counted (else every string state looks alike, which keeps the mask cache small). */
    boolean countsLength() {
      return pattern != null || maxLength != Integer.MAX_VALUE || minLength > 0;
    }
  }

  /** An integer (at most 18 digits, so it fits a long) or a decimal number (see {@link NumberText}) within bounds. */
  static final class NumberNode extends SchemaNode {
    final boolean integer;
    final BigDecimal min;    // null: none
    final boolean minExclusive;
    final BigDecimal max;    // null: none
    final boolean maxExclusive;

    NumberNode(String path, boolean integer, BigDecimal min, boolean minExclusive, BigDecimal max, boolean maxExclusive) {
      super(path);
      this.integer = integer;
      this.min = min;
      this.minExclusive = minExclusive;
      this.max = max;
      this.maxExclusive = maxExclusive;
    }
  }

  /** One of a fixed set of JSON texts (enum, const, true/false, null), sorted bytewise. */
  static final class LiteralNode extends SchemaNode {
    final List<byte[]> literals;

    LiteralNode(String path, List<byte[]> literals) {
      super(path);
      this.literals = literals;
    }
  }

  /** Any of the alternatives (anyOf; oneOf whose alternatives cannot match the same value; a type array). */
  static final class AnyOfNode extends SchemaNode {
    final List<SchemaNode> alternatives;

    AnyOfNode(String path, List<SchemaNode> alternatives) {
      super(path);
      this.alternatives = alternatives;
    }
  }

  /** A {@code $ref} within the schema; {@link #target} is set once every node is compiled. */
  static final class RefNode extends SchemaNode {
    SchemaNode target;

    RefNode(String path) {
      super(path);
    }
  }

  /** The node a value starts in: refs followed. */
  static SchemaNode resolve(SchemaNode n) {
    for (int hops = 0; n instanceof RefNode r; hops++) {
      if (hops > 64) throw new IllegalStateException("$ref chain at " + n.path);
      n = r.target;
    }
    return n;
  }
}
