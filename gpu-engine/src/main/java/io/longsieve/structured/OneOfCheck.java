package io.longsieve.structured;

import io.longsieve.structured.SchemaNode.AnyOfNode;
import io.longsieve.structured.SchemaNode.ArrayNode;
import io.longsieve.structured.SchemaNode.LiteralNode;
import io.longsieve.structured.SchemaNode.NumberNode;
import io.longsieve.structured.SchemaNode.ObjectNode;
import io.longsieve.structured.SchemaNode.Property;
import io.longsieve.structured.SchemaNode.StringNode;
import java.nio.charset.StandardCharsets;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * {@code oneOf} asks that a value match exactly one alternative. The matcher generates a value of one
 * alternative, so it runs a oneOf only when no value can match two of them, which this class proves
 * with sufficient conditions: the alternatives produce different kinds of JSON value, or different
 * literal values, or are objects told apart by a required property whose enum/const values differ (a
 * discriminator). Anything else is refused; anyOf accepts it.
 */
final class OneOfCheck {
  private OneOfCheck() {}

  private enum Kind { OBJECT, ARRAY, STRING, NUMBER, BOOLEAN, NULL }

  static void disjoint(AnyOfNode oneOf) {
    List<SchemaNode> alts = oneOf.alternatives;
    for (int i = 0; i < alts.size(); i++) {
      for (int j = i + 1; j < alts.size(); j++) {
        if (!disjoint(SchemaNode.resolve(alts.get(i)), SchemaNode.resolve(alts.get(j)), 0)) {
          throw new SchemaException("oneOf", oneOf.path, "alternatives " + i + " and " + j + " can match the same value, "
              + "which oneOf forbids; use anyOf, or tell them apart by type or by a required property with different const values");
        }
      }
    }
  }

  private static boolean disjoint(SchemaNode a, SchemaNode b, int depth) {
    if (depth > 8) return false;
    if (a instanceof AnyOfNode any) {
      for (SchemaNode x : any.alternatives) if (!disjoint(SchemaNode.resolve(x), b, depth + 1)) return false;
      return true;
    }
    if (b instanceof AnyOfNode) return disjoint(b, a, depth + 1);
    Set<Kind> ka = kinds(a), kb = kinds(b);
    Set<Kind> both = EnumSet.copyOf(ka);
    both.retainAll(kb);
    if (both.isEmpty()) return true;
    if (a instanceof LiteralNode la && b instanceof LiteralNode lb) return !overlap(la, lb);
    if (a instanceof ObjectNode oa && b instanceof ObjectNode ob) return discriminated(oa, ob, depth);
    return false;
  }

  private static boolean discriminated(ObjectNode a, ObjectNode b, int depth) {
    for (Property pa : a.properties) {
      if (!pa.required()) continue;
      for (Property pb : b.properties) {
        if (pb.required() && pb.name().equals(pa.name())
            && disjoint(SchemaNode.resolve(pa.node()), SchemaNode.resolve(pb.node()), depth + 1)) {
          return true;
        }
      }
    }
    return false;
  }

  private static boolean overlap(LiteralNode a, LiteralNode b) {
    Set<String> sa = new HashSet<>();
    for (byte[] l : a.literals) sa.add(normal(l));
    for (byte[] l : b.literals) if (sa.contains(normal(l))) return true;
    return false;
  }

  /** Canonical texts of equal values are equal, except numbers such as 1 and 1.0: those by value. */
  private static String normal(byte[] literal) {
    String s = new String(literal, StandardCharsets.UTF_8);
    if (kindOf(literal[0]) != Kind.NUMBER) return s;
    return new java.math.BigDecimal(s).stripTrailingZeros().toPlainString();
  }

  private static Set<Kind> kinds(SchemaNode n) {
    if (n instanceof ObjectNode) return EnumSet.of(Kind.OBJECT);
    if (n instanceof ArrayNode) return EnumSet.of(Kind.ARRAY);
    if (n instanceof StringNode) return EnumSet.of(Kind.STRING);
    if (n instanceof NumberNode) return EnumSet.of(Kind.NUMBER);
    if (n instanceof LiteralNode l) {
      Set<Kind> k = EnumSet.noneOf(Kind.class);
      for (byte[] t : l.literals) k.add(kindOf(t[0]));
      return k;
    }
    return EnumSet.allOf(Kind.class);
  }

  private static Kind kindOf(byte first) {
    return switch (first) {
      case '{' -> Kind.OBJECT;
      case '[' -> Kind.ARRAY;
      case '"' -> Kind.STRING;
      case 't', 'f' -> Kind.BOOLEAN;
      case 'n' -> Kind.NULL;
      default -> Kind.NUMBER;
    };
  }
}
