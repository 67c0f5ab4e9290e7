package io.longsieve.job;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.structured.OutputSchema;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * {@code --typed-output}: the {@code answer} column, the output JSON parsed (Jackson) into a Spark
 * value whose type comes from the run's schema, so analysts query fields instead of parsing text.
 *
 * <p>The mapping (docs/structured-output.md): object with properties → struct (every field nullable,
 * declared order); array → array; string → string; integer → long; number → double; boolean →
 * boolean; enum/const → the type all its values share (strings → string, integers → long, numbers →
 * double, booleans → boolean), else string; anyOf/oneOf and type arrays → the one type their
 * alternatives share once null is set aside (["integer", "null"] → nullable long), else string holding the
 * value's JSON text; null → string (always null: Parquet has no void type); an object without properties
 * and a {@code $ref} back into a schema being mapped (recursion) → string holding the JSON text.
 *
 * <p>The column is null where the status is not ok (a cut document, an error) and where the text does
 * not parse or a value does not fit its type; with a schema the run wrote, every ok row parses (the report
 * shows the share).
 */
final class AnswerColumn implements Serializable {

  static final String COLUMN = "answer";
  private static final ObjectMapper JSON = new ObjectMapper();

  private AnswerColumn() {}

  /** The Spark type of values of {@code schema}. */
  static DataType sparkType(OutputSchema schema) {
    JsonNode root = schema.tree();
    return type(root, root, new HashSet<>());
  }

  /** {@code outputs} (columns of {@link JobSchemas#OUTPUTS}, with status and output) with the answer column last. */
  static Dataset<Row> add(Dataset<Row> outputs, OutputSchema schema) {
    DataType type = sparkType(schema);
    StructType with = outputs.schema().add(COLUMN, type, true);
    int status = outputs.schema().fieldIndex("status");
    int output = outputs.schema().fieldIndex("output");
    return outputs.map((MapFunction<Row, Row>) r -> {
      Object[] v = new Object[with.size()];
      for (int i = 0; i < r.size(); i++) v[i] = r.get(i);
      v[r.size()] = JobSchemas.OK.equals(r.get(status)) ? parse(r.getString(output), type) : null;
      return new GenericRowWithSchema(v, with);
    }, Encoders.row(with));
  }

  /** The answer of one output text, or null when it does not parse into {@code type}. */
  static Object parse(String text, DataType type) {
    if (text == null) return null;
    try {
      return value(JSON.readTree(text), type);
    } catch (Exception e) {
      return null;
    }
  }

  private static DataType type(JsonNode s, JsonNode root, Set<String> expanding) {
    if (s.has("$ref")) {
      String ref = s.get("$ref").asText();
      if (!expanding.add(ref)) return DataTypes.StringType; // recursion: the JSON text
      try {
        return type(ref.equals("#") ? root : root.at(ref.substring(1)), root, expanding);
      } finally {
        expanding.remove(ref);
      }
    }
    if (s.has("anyOf") || s.has("oneOf")) {
      List<DataType> alts = new ArrayList<>();
      for (JsonNode a : s.has("anyOf") ? s.get("anyOf") : s.get("oneOf")) {
        if (!isNull(a)) alts.add(type(a, root, expanding));
      }
      return common(alts);
    }
    if (s.has("enum") || s.has("const")) {
      List<DataType> kinds = new ArrayList<>();
      for (JsonNode v : s.has("enum") ? s.get("enum") : List.of(s.get("const"))) {
        if (!v.isNull()) kinds.add(v.isTextual() ? DataTypes.StringType : v.isBoolean() ? DataTypes.BooleanType
            : v.isIntegralNumber() ? DataTypes.LongType : v.isNumber() ? DataTypes.DoubleType : DataTypes.StringType);
      }
      return common(kinds);
    }
    List<String> types = new ArrayList<>();
    JsonNode t = s.get("type");
    if (t == null) types.add(s.has("properties") ? "object" : "array");
    else if (t.isArray()) t.forEach(x -> types.add(x.asText()));
    else types.add(t.asText());
    List<DataType> alts = new ArrayList<>();
    for (String name : types) if (!name.equals("null")) alts.add(typed(name, s, root, expanding));
    return common(alts);
  }

  private static DataType typed(String name, JsonNode s, JsonNode root, Set<String> expanding) {
    switch (name) {
      case "object" -> {
        JsonNode props = s.path("properties");
        if (props.isEmpty()) return DataTypes.StringType;
        StructType st = new StructType();
        for (Iterator<Map.Entry<String, JsonNode>> it = props.fields(); it.hasNext(); ) {
          Map.Entry<String, JsonNode> e = it.next();
          st = st.add(e.getKey(), type(e.getValue(), root, expanding), true);
        }
        return st;
      }
      case "array" -> {
        return DataTypes.createArrayType(type(s.get("items"), root, expanding), true);
      }
      case "integer" -> {
        return DataTypes.LongType;
      }
      case "number" -> {
        return DataTypes.DoubleType;
      }
      case "boolean" -> {
        return DataTypes.BooleanType;
      }
      default -> {
        return DataTypes.StringType;
      }
    }
  }

  private static boolean isNull(JsonNode s) {
    return s.path("type").asText("").equals("null") && !s.has("enum") && !s.has("const");
  }

  /** The one type every alternative has; long and double make double; else string (the JSON text). */
  private static DataType common(List<DataType> types) {
    Set<DataType> set = new LinkedHashSet<>(types);
    if (set.isEmpty()) return DataTypes.StringType;
    if (set.size() == 1) return set.iterator().next();
    if (set.equals(Set.of(DataTypes.LongType, DataTypes.DoubleType))) return DataTypes.DoubleType;
    return DataTypes.StringType;
  }

  /** A JSON value as a Spark value of {@code type}; throws when it does not fit. */
  static Object value(JsonNode v, DataType type) {
    if (v == null || v.isNull()) return null;
    if (type instanceof StructType st) {
      if (!v.isObject()) throw new IllegalArgumentException("not an object");
      Object[] fields = new Object[st.size()];
      StructField[] f = st.fields();
      for (int i = 0; i < f.length; i++) fields[i] = value(v.get(f[i].name()), f[i].dataType());
      return new GenericRowWithSchema(fields, st);
    }
    if (type instanceof ArrayType at) {
      if (!v.isArray()) throw new IllegalArgumentException("not an array");
      List<Object> items = new ArrayList<>(v.size());
      for (JsonNode e : v) items.add(value(e, at.elementType()));
      return JobSchemas.seq(items);
    }
    if (type == DataTypes.LongType) {
      if (!v.isIntegralNumber() || !v.canConvertToLong()) throw new IllegalArgumentException("not a long");
      return v.longValue();
    }
    if (type == DataTypes.DoubleType) {
      if (!v.isNumber()) throw new IllegalArgumentException("not a number");
      return v.doubleValue();
    }
    if (type == DataTypes.BooleanType) {
      if (!v.isBoolean()) throw new IllegalArgumentException("not a boolean");
      return v.booleanValue();
    }
    return v.isTextual() ? v.asText() : v.toString();
  }
}
