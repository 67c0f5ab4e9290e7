package io.longsieve.structured;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.structured.SchemaNode.AnyOfNode;
import io.longsieve.structured.SchemaNode.ArrayNode;
import io.longsieve.structured.SchemaNode.LiteralNode;
import io.longsieve.structured.SchemaNode.NumberNode;
import io.longsieve.structured.SchemaNode.ObjectNode;
import io.longsieve.structured.SchemaNode.Property;
import io.longsieve.structured.SchemaNode.RefNode;
import io.longsieve.structured.SchemaNode.StringNode;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Compiles a JSON Schema of the supported subset into {@link SchemaNode}s, refusing anything else
 * with a {@link SchemaException} that names the keyword: an unknown or unsupported keyword, a bad
 * value, a {@code $ref} outside the document, a {@code oneOf} whose alternatives can match the same
 * value, or a schema no value satisfies within {@link JsonMatcher#MAX_DEPTH} levels.
 */
final class SchemaCompiler {

  private static final ObjectMapper JSON = new ObjectMapper();

  /** Keywords that only annotate: read by people and tools, no effect on which values are valid. */
  static final Set<String> ANNOTATIONS = Set.of("$schema", "$id", "$comment", "title", "description", "default",
      "examples", "deprecated", "readOnly", "writeOnly", "$defs", "definitions");
  /** Every keyword of the subset (docs/structured-output.md). */
  static final Set<String> SUPPORTED = Set.of("type", "enum", "const", "anyOf", "oneOf", "$ref", "properties", "required",
      "additionalProperties", "items", "minItems", "maxItems", "minLength", "maxLength", "pattern", "minimum", "maximum",
      "exclusiveMinimum", "exclusiveMaximum");
  private static final Set<String> TYPES = Set.of("object", "array", "string", "integer", "number", "boolean", "null");

  private final JsonNode root;
  private final Map<String, SchemaNode> byPointer = new HashMap<>(); // compiled $ref targets
  private final List<RefNode> refs = new ArrayList<>();
  private final List<SchemaNode> all = new ArrayList<>();

  private SchemaCompiler(JsonNode root) {
    this.root = root;
  }

  /** The compiled root of {@code root} (a parsed schema document). */
  static SchemaNode compile(JsonNode root) {
    SchemaCompiler c = new SchemaCompiler(root);
    SchemaNode top = c.node(root, "#");
    c.resolveRefs();
    c.depths();
    if (top.minDepth > JsonMatcher.MAX_DEPTH) {
      throw new SchemaException(null, "#", top.minDepth >= SchemaNode.INFEASIBLE ? "no JSON value satisfies the schema"
          : "its smallest value nests " + top.minDepth + " levels, more than the " + JsonMatcher.MAX_DEPTH + " supported");
    }
    return top;
  }

  private SchemaNode node(JsonNode s, String path) {
    if (!s.isObject()) {
      throw new SchemaException(null, path, "a schema must be a JSON object here, not " + kind(s)
          + (s.isBoolean() ? " (boolean schemas are not supported)" : ""));
    }
    for (Iterator<String> it = s.fieldNames(); it.hasNext(); ) {
      String k = it.next();
      if (!SUPPORTED.contains(k) && !ANNOTATIONS.contains(k)) {
        throw new SchemaException(k, path, "is not supported by structured output (see docs/structured-output.md)");
      }
    }
    SchemaNode n = build(s, path);
    all.add(n);
    return n;
  }

  private SchemaNode build(JsonNode s, String path) {
    if (s.has("$ref")) {
      only(s, path, "$ref");
      JsonNode ref = s.get("$ref");
      if (!ref.isTextual() || !ref.asText().startsWith("#")) {
        throw new SchemaException("$ref", path, "only references within the schema ('#', '#/$defs/name') are supported");
      }
      RefNode r = new RefNode(path);
      r.target = null;
      refs.add(r);
      pointers.put(r, ref.asText());
      return r;
    }
    if (s.has("anyOf") || s.has("oneOf")) {
      String kw = s.has("anyOf") ? "anyOf" : "oneOf";
      only(s, path, kw);
      JsonNode alts = s.get(kw);
      if (!alts.isArray() || alts.isEmpty()) throw new SchemaException(kw, path, "must be a non-empty array of schemas");
      List<SchemaNode> out = new ArrayList<>();
      for (int i = 0; i < alts.size(); i++) out.add(node(alts.get(i), path + "/" + kw + "/" + i));
      AnyOfNode a = new AnyOfNode(path, out);
      if (kw.equals("oneOf")) oneOfs.add(a);
      return a;
    }
    if (s.has("enum") || s.has("const")) return literals(s, path);
    List<String> types = types(s, path);
    if (types.size() == 1) return typed(s, path, types.get(0));
    List<SchemaNode> alts = new ArrayList<>();
    for (String t : types) {
      SchemaNode n = typed(s, path, t);
      all.add(n);
      alts.add(n);
    }
    return new AnyOfNode(path, alts);
  }

  private final Map<RefNode, String> pointers = new HashMap<>();
  private final List<AnyOfNode> oneOfs = new ArrayList<>();

  /** Refuses every keyword next to {@code kw} that is not an annotation (they would intersect with it). */
  private static void only(JsonNode s, String path, String kw) {
    for (Iterator<String> it = s.fieldNames(); it.hasNext(); ) {
      String k = it.next();
      if (!k.equals(kw) && !ANNOTATIONS.contains(k)) {
        throw new SchemaException(k, path, "next to '" + kw + "' is not supported: move it into the " + kw
            + (kw.equals("$ref") ? " target" : " alternatives"));
      }
    }
  }

  private List<String> types(JsonNode s, String path) {
    JsonNode t = s.get("type");
    List<String> out = new ArrayList<>();
    if (t == null) {
      if (s.has("properties")) out.add("object");
      else if (s.has("items")) out.add("array");
      else throw new SchemaException("type", path, "is missing: say which kind of value goes here");
      return out;
    }
    if (t.isTextual()) {
      out.add(t.asText());
    } else if (t.isArray() && !t.isEmpty()) {
      for (JsonNode e : t) out.add(e.asText(""));
    } else {
      throw new SchemaException("type", path, "must be a type name or a non-empty array of them");
    }
    for (String name : out) {
      if (!TYPES.contains(name)) throw new SchemaException("type", path, "unknown type '" + name + "'");
    }
    if (new LinkedHashSet<>(out).size() != out.size()) throw new SchemaException("type", path, "names a type twice");
    return out;
  }

  private SchemaNode typed(JsonNode s, String path, String type) {
    return switch (type) {
      case "object" -> object(s, path);
      case "array" -> array(s, path);
      case "string" -> string(s, path);
      case "integer", "number" -> number(s, path, type.equals("integer"));
      case "boolean" -> new LiteralNode(path, sorted(List.of(bytes("false"), bytes("true"))));
      default -> new LiteralNode(path, List.of(bytes("null")));
    };
  }

  private SchemaNode object(JsonNode s, String path) {
    JsonNode props = s.path("properties");
    if (!props.isMissingNode() && !props.isObject()) throw new SchemaException("properties", path, "must be an object");
    JsonNode add = s.get("additionalProperties");
    if (add != null && !add.isBoolean()) {
      throw new SchemaException("additionalProperties", path, "only true or false is supported (outputs hold the declared properties)");
    }
    Set<String> required = new LinkedHashSet<>();
    JsonNode req = s.get("required");
    if (req != null) {
      if (!req.isArray()) throw new SchemaException("required", path, "must be an array of property names");
      for (JsonNode r : req) {
        if (!r.isTextual() || !required.add(r.asText())) {
          throw new SchemaException("required", path, "must list distinct property names");
        }
        if (!props.has(r.asText())) {
          throw new SchemaException("required", path, "names '" + r.asText() + "', which is not in properties");
        }
      }
    }
    List<Property> out = new ArrayList<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = props.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      SchemaNode child = node(e.getValue(), path + "/properties/" + escape(e.getKey()));
      out.add(new Property(e.getKey(), literal(JSON.getNodeFactory().textNode(e.getKey())), child,
          required.contains(e.getKey())));
    }
    return new ObjectNode(path, List.copyOf(out));
  }

  private SchemaNode array(JsonNode s, String path) {
    JsonNode items = s.get("items");
    if (items == null) throw new SchemaException("items", path, "is missing: an array needs the schema of its items");
    if (!items.isObject()) throw new SchemaException("items", path, "must be one schema (tuples are not supported)");
    int min = count(s, "minItems", path, 0);
    int max = count(s, "maxItems", path, Integer.MAX_VALUE);
    if (min > max) throw new SchemaException("minItems", path, "is above maxItems");
    return new ArrayNode(path, node(items, path + "/items"), min, max);
  }

  private SchemaNode string(JsonNode s, String path) {
    int min = count(s, "minLength", path, 0);
    int max = count(s, "maxLength", path, Integer.MAX_VALUE);
    if (min > max) throw new SchemaException("minLength", path, "is above maxLength");
    JsonNode p = s.get("pattern");
    if (p != null && !p.isTextual()) throw new SchemaException("pattern", path, "must be a string");
    try {
      return new StringNode(path, min, max, p == null ? null : EcmaPattern.compile(p.asText(), path));
    } catch (SchemaException e) {
      if (e.path() == null) throw new SchemaException(e.keyword(), path, e.getMessage().replaceFirst("^'[^']*' ", ""));
      throw e;
    }
  }

  private SchemaNode number(JsonNode s, String path, boolean integer) {
    BigDecimal min = bound(s, "minimum", path), max = bound(s, "maximum", path);
    BigDecimal xmin = bound(s, "exclusiveMinimum", path), xmax = bound(s, "exclusiveMaximum", path);
    boolean minEx = false, maxEx = false;
    if (xmin != null && (min == null || xmin.compareTo(min) >= 0)) {
      min = xmin;
      minEx = true;
    }
    if (xmax != null && (max == null || xmax.compareTo(max) <= 0)) {
      max = xmax;
      maxEx = true;
    }
    return new NumberNode(path, integer, min, minEx, max, maxEx);
  }

  private LiteralNode literals(JsonNode s, String path) {
    String kw = s.has("enum") ? "enum" : "const";
    for (Iterator<String> it = s.fieldNames(); it.hasNext(); ) {
      String k = it.next();
      if (!k.equals(kw) && !k.equals("type") && !ANNOTATIONS.contains(k)) {
        throw new SchemaException(k, path, "next to '" + kw + "' is not supported: list only the values you want");
      }
    }
    List<JsonNode> values = new ArrayList<>();
    if (kw.equals("const")) {
      values.add(s.get("const"));
    } else {
      if (!s.get("enum").isArray() || s.get("enum").isEmpty()) throw new SchemaException("enum", path, "must be a non-empty array");
      s.get("enum").forEach(values::add);
    }
    List<String> types = s.has("type") ? types(s, path) : null;
    List<byte[]> out = new ArrayList<>();
    Set<String> seen = new LinkedHashSet<>();
    for (JsonNode v : values) {
      if (types != null && !types.contains(kind(v)) && !(types.contains("number") && v.isNumber())) continue;
      byte[] text = literal(v);
      if (seen.add(new String(text, StandardCharsets.UTF_8))) out.add(text);
    }
    if (out.isEmpty()) throw new SchemaException(kw, path, "holds no value of the type asked for");
    return new LiteralNode(path, sorted(out));
  }

  private void resolveRefs() {
    for (int i = 0; i < refs.size(); i++) { // a target compiled here may add refs of its own
      RefNode r = refs.get(i);
      String pointer = pointers.get(r);
      SchemaNode target = byPointer.get(pointer);
      if (target == null) {
        JsonNode t = pointer.equals("#") ? root : root.at(pointer.substring(1));
        if (t.isMissingNode()) throw new SchemaException("$ref", r.path, "'" + pointer + "' points to nothing in the schema");
        target = node(t, pointer);
        byPointer.put(pointer, target);
      }
      r.target = target;
    }
    for (RefNode r : refs) {
      SchemaNode n = r;
      for (int hops = 0; n instanceof RefNode rr; hops++) {
        if (hops > refs.size()) throw new SchemaException("$ref", r.path, "refers to itself without naming a schema");
        n = rr.target;
      }
    }
    for (AnyOfNode a : oneOfs) OneOfCheck.disjoint(a);
  }

  /** Fills minDepth on every node: the least fixpoint, iterated until nothing shrinks. */
  private void depths() {
    boolean changed = true;
    while (changed) {
      changed = false;
      for (SchemaNode n : all) {
        int d = depth(n);
        if (d < n.minDepth) {
          n.minDepth = d;
          changed = true;
        }
      }
      for (RefNode r : refs) {
        if (r.target.minDepth < r.minDepth) {
          r.minDepth = r.target.minDepth;
          changed = true;
        }
      }
    }
  }

  private static int depth(SchemaNode n) {
    if (n instanceof ObjectNode o) {
      int d = 0;
      for (Property p : o.properties) if (p.required()) d = Math.max(d, p.node().minDepth);
      return Math.min(SchemaNode.INFEASIBLE, 1 + d);
    }
    if (n instanceof ArrayNode a) return Math.min(SchemaNode.INFEASIBLE, 1 + (a.minItems > 0 ? a.items.minDepth : 0));
    if (n instanceof StringNode s) {
      boolean ok = s.minLength <= s.maxLength && (s.reach == null || s.reach.canFinish(s.pattern.getInitialState(), 0));
      return ok ? 0 : SchemaNode.INFEASIBLE;
    }
    if (n instanceof NumberNode num) return NumberText.live(num, "") ? 0 : SchemaNode.INFEASIBLE;
    if (n instanceof LiteralNode) return 0;
    if (n instanceof AnyOfNode any) {
      return any.alternatives.stream().mapToInt(x -> x.minDepth).min().orElse(SchemaNode.INFEASIBLE);
    }
    return ((RefNode) n).target.minDepth;
  }

  private static int count(JsonNode s, String kw, String path, int dflt) {
    JsonNode v = s.get(kw);
    if (v == null) return dflt;
    if (!v.isIntegralNumber() || !v.canConvertToInt() || v.intValue() < 0) {
      throw new SchemaException(kw, path, "must be a non-negative integer");
    }
    return v.intValue();
  }

  private static BigDecimal bound(JsonNode s, String kw, String path) {
    JsonNode v = s.get(kw);
    if (v == null) return null;
    if (!v.isNumber()) {
      throw new SchemaException(kw, path, "must be a number" + (v.isBoolean() ? " (draft-04's boolean form is not supported)" : ""));
    }
    return v.decimalValue();
  }

  /** A value's canonical JSON text: what the output writes for it. */
  static byte[] literal(JsonNode v) {
    try {
      return JSON.writeValueAsBytes(v);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static List<byte[]> sorted(List<byte[]> in) {
    List<byte[]> out = new ArrayList<>(in);
    out.sort(Arrays::compareUnsigned);
    return List.copyOf(out);
  }

  static String kind(JsonNode v) {
    if (v.isObject()) return "object";
    if (v.isArray()) return "array";
    if (v.isTextual()) return "string";
    if (v.isIntegralNumber() || v.isNumber() && v.decimalValue().stripTrailingZeros().scale() <= 0) return "integer";
    if (v.isNumber()) return "number";
    if (v.isBoolean()) return "boolean";
    return "null";
  }

  private static String escape(String key) {
    return key.replace("~", "~0").replace("/", "~1");
  }
}
