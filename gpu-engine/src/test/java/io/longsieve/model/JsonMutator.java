package io.longsieve.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Random;

/**
 * Structured mutations of a JSON document for the fuzz suites: a random field or element is
 * removed or replaced by a value of the wrong type (null, number, text, boolean, array, object).
 * Mutations at the top of the tree are as likely as deep ones, so both "tokenizer.json has no
 * model" and "one merge rule is a number" come up.
 */
final class JsonMutator {
  private JsonMutator() {}

  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

  /** A place in the tree: an object field or an array element. */
  private record Slot(JsonNode parent, String field, int index) {}

  /** Applies {@code count} mutations to {@code root} in place. */
  static void mutate(JsonNode root, int count, Random r) {
    for (int i = 0; i < count; i++) {
      List<Slot> slots = new ArrayList<>();
      collect(root, slots, 0, r);
      if (slots.isEmpty()) return;
      Slot s = slots.get(r.nextInt(slots.size()));
      boolean remove = r.nextInt(4) == 0;
      if (s.parent instanceof ObjectNode o) {
        if (remove) o.remove(s.field);
        else o.set(s.field, wrongValue(r));
      } else if (s.parent instanceof ArrayNode a) {
        if (remove) a.remove(s.index);
        else a.set(s.index, wrongValue(r));
      }
    }
  }

  /** Every slot down to depth 3, then a sample of the deeper ones (a tokenizer has ~10^4 nodes). */
  private static void collect(JsonNode node, List<Slot> out, int depth, Random r) {
    if (depth > 3 && r.nextInt(8) != 0) return;
    if (node instanceof ObjectNode o) {
      for (Iterator<String> it = o.fieldNames(); it.hasNext(); ) {
        String f = it.next();
        out.add(new Slot(o, f, -1));
        collect(o.get(f), out, depth + 1, r);
      }
    } else if (node instanceof ArrayNode a) {
      for (int i = 0; i < a.size(); i++) {
        if (depth > 3 && r.nextInt(16) != 0) continue;
        out.add(new Slot(a, null, i));
        collect(a.get(i), out, depth + 1, r);
      }
    }
  }

  static JsonNode wrongValue(Random r) {
    switch (r.nextInt(8)) {
      case 0: return NODES.nullNode();
      case 1: return NODES.numberNode(r.nextInt(3) - 1);
      case 2: return NODES.numberNode(r.nextBoolean() ? Long.MAX_VALUE : -1e300);
      case 3: return NODES.textNode(r.nextBoolean() ? "" : "{{ raise_exception('x') }}");
      case 4: return NODES.booleanNode(r.nextBoolean());
      case 5: return NODES.arrayNode().add(1).add("a");
      case 6: return NODES.objectNode().put("type", "BPE");
      default: return NODES.objectNode();
    }
  }
}
