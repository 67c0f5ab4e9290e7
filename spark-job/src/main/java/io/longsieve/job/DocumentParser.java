package io.longsieve.job;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;

/**
 * Turns one input line (a JSON object) into a {@link JobSchemas#PARSED} row, checking every field.
 * Never throws for bad data: a bad line becomes a row with status {@code bad_input} and a message
 * that names the field, so one bad row never fails the job.
 *
 * <p>Rules (documented for users in the README):
 * <ul>
 *   <li>{@code doc_id}: a string or an integer. A row without one gets {@code <file name>:<line>}
 *       (1-based line of a JSONL file, 1-based row of a Parquet file), stable across runs of the same
 *       input, and is processed normally. A malformed line gets that id too.</li>
 *   <li>{@code task}: summary, qa or multi_doc_qa.</li>
 *   <li>summary and qa need a non-empty {@code text} or {@code documents}; multi_doc_qa needs a
 *       non-empty {@code documents} array of {title, text} objects (title optional, text required).
 *       Giving both text and documents is refused, so no input is silently ignored.</li>
 *   <li>qa and multi_doc_qa need a non-empty {@code question}; {@code reference} is optional.</li>
 *   <li>Other fields are ignored, so rows may carry their own metadata.</li>
 * </ul>
 */
final class DocumentParser {
  private DocumentParser() {}

  /** Strict: text after the object and a field given twice are errors, not silently dropped. */
  private static final ObjectMapper JSON = new ObjectMapper()
      .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
      .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION);

  /** A reason a row is bad; becomes the row's error text. */
  private static final class BadInput extends Exception {
    BadInput(String message) {
      super(message, null, false, false);
    }
  }

  /** Parses one line; {@code validUtf8} false means the raw bytes were not UTF-8. */
  static Row parse(String value, boolean validUtf8, String fileName, String filePath, long line) {
    String source = fileName + ":" + line;
    if (!validUtf8) return bad(source, filePath, line, source, true, "invalid UTF-8 in " + source);
    JsonNode root;
    try {
      root = JSON.readTree(value);
    } catch (JsonProcessingException e) {
      return bad(source, filePath, line, source, true, "malformed JSON at " + source + ": " + e.getOriginalMessage());
    }
    if (root == null || !root.isObject()) {
      return bad(source, filePath, line, source, true, "not a JSON object at " + source);
    }
    String docId;
    boolean generated;
    try {
      docId = docId(root.get("doc_id"));
    } catch (BadInput e) {
      return bad(source, filePath, line, source, true, e.getMessage());
    }
    generated = docId == null;
    if (generated) docId = source;
    try {
      String task = requiredString(root, "task");
      if (!JobSchemas.TASKS.contains(task)) {
        throw new BadInput("unknown task '" + task + "' (known: " + String.join(", ", JobSchemas.TASKS) + ")");
      }
      String text = optionalString(root, "text");
      List<Row> documents = documents(root.get("documents"));
      if (text != null && documents != null) throw new BadInput("give either 'text' or 'documents', not both");
      if (task.equals("multi_doc_qa") && documents == null) {
        throw new BadInput("task multi_doc_qa needs a non-empty 'documents' array of {title, text}");
      }
      if (text == null && documents == null) throw new BadInput("missing field 'text' (or 'documents')");
      String question = optionalString(root, "question");
      if (!task.equals("summary") && question == null) throw new BadInput("task " + task + " needs a 'question'");
      String reference = optionalString(root, "reference");
      long size = text != null ? text.length() : 0;
      if (documents != null) for (Row d : documents) size += d.getString(1).length();
      return row(docId, generated, source, filePath, line, task, text,
          documents == null ? null : JobSchemas.seq(documents), question, reference, null, null, size);
    } catch (BadInput e) {
      return bad(docId, filePath, line, source, generated, e.getMessage());
    }
  }

  private static Row bad(String docId, String filePath, long line, String source, boolean generated, String error) {
    return row(docId, generated, source, filePath, line, null, null, null, null, null,
        JobSchemas.BAD_INPUT, error, 0L);
  }

  /** A row that knows its schema, so readers (and tests) can get fields by name. */
  private static Row row(Object... values) {
    return new GenericRowWithSchema(values, JobSchemas.PARSED);
  }

  /** The id as text; null when absent. */
  private static String docId(JsonNode n) throws BadInput {
    if (n == null || n.isNull()) return null;
    if (n.isTextual()) {
      String s = n.asText();
      if (s.isBlank()) throw new BadInput("field 'doc_id' is empty");
      return s;
    }
    if (n.isIntegralNumber()) return n.asText();
    throw new BadInput("field 'doc_id' must be a string or an integer, not " + kind(n));
  }

  private static String requiredString(JsonNode root, String field) throws BadInput {
    String s = optionalString(root, field);
    if (s == null) throw new BadInput("missing field '" + field + "'");
    return s;
  }

  /** A string field's value; null when absent or JSON null; empty or blank is an error. */
  private static String optionalString(JsonNode root, String field) throws BadInput {
    JsonNode n = root.get(field);
    if (n == null || n.isNull()) return null;
    if (!n.isTextual()) throw new BadInput("field '" + field + "' must be a string, not " + kind(n));
    String s = n.asText();
    if (s.isBlank()) throw new BadInput("field '" + field + "' is empty");
    return s;
  }

  /** documents as rows of {@link JobSchemas#DOCUMENT}; null when absent. */
  private static List<Row> documents(JsonNode n) throws BadInput {
    if (n == null || n.isNull()) return null;
    if (!n.isArray()) throw new BadInput("field 'documents' must be an array of {title, text}, not " + kind(n));
    if (n.isEmpty()) throw new BadInput("field 'documents' is empty");
    List<Row> out = new ArrayList<>();
    int i = 0;
    for (Iterator<JsonNode> it = n.elements(); it.hasNext(); i++) {
      JsonNode d = it.next();
      if (!d.isObject()) throw new BadInput("documents[" + i + "] must be an object {title, text}, not " + kind(d));
      String title;
      String text;
      try {
        title = optionalString(d, "title");
        text = optionalString(d, "text");
      } catch (BadInput e) {
        throw new BadInput("documents[" + i + "]: " + e.getMessage());
      }
      if (text == null) throw new BadInput("documents[" + i + "]: missing field 'text'");
      out.add(RowFactory.create(title, text));
    }
    return out;
  }

  private static String kind(JsonNode n) {
    return switch (n.getNodeType()) {
      case ARRAY -> "an array";
      case OBJECT -> "an object";
      case NUMBER -> "a number";
      case BOOLEAN -> "a boolean";
      case STRING -> "a string";
      default -> n.getNodeType().name().toLowerCase(java.util.Locale.ROOT);
    };
  }
}
