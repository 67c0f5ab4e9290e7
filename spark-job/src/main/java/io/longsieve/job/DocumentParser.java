package io.longsieve.job;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;

/**
 * Turns one input line (a JSON object, or an array of them) into {@link JobSchemas#PARSED} rows,
 * checking every field. Never throws for bad data: a bad line becomes a row with status
 * {@code bad_input} and a message that names the field, so one bad row never fails the job.
 *
 * <p>Rules (documented for users in docs/input.md):
 * <ul>
 *   <li>A line holds one JSON object. A line that is a JSON array gives one row per element (each
 *       element checked as a line; its source is {@code <file>:<line>[<index>]}); an empty array is
 *       one bad_input row.</li>
 *   <li>A line longer than {@link #MAX_LINE_MB} MB (UTF-8) is bad_input "line too long": no model
 *       context holds that much text, and the limit bounds an executor's memory per row.</li>
 *   <li>{@code doc_id}: a string or an integer. A row without one gets an id from its content
 *       ({@link ContentId}: {@code auto-} and 16 hex digits), stable across reorders and runs, and is
 *       processed normally. A line that is not a JSON object gets {@code <file name>:<line>}.</li>
 *   <li>{@code prompt}: the row's own prompt template ({@link PromptTemplate}; without placeholders
 *       it is the whole prompt). With it, or with a run-level template, {@code task} is optional and
 *       the template's placeholders say what the row needs: a placeholder the row has no value for,
 *       or a template that does not parse, is bad_input naming it.</li>
 *   <li>{@code messages}: the row's chat conversation, an array of {role, content} (system, user,
 *       assistant; the last one the user's), instead of a prompt: the chat template renders it as is,
 *       no placeholders; not with {@code prompt} or {@code raw}, nor with {@code text}, {@code documents} or
 *       {@code question}, which it would leave unused.</li>
 *   <li>{@code task}: summary, qa or multi_doc_qa, the preset prompt ({@link PromptBuilder#PRESETS})
 *       when there is no template.</li>
 *   <li>summary and qa need a non-empty {@code text} or {@code documents}; multi_doc_qa needs a
 *       non-empty {@code documents} array of {title, text} objects (title optional, text required).
 *       Giving both text and documents is refused, so no input is silently ignored.</li>
 *   <li>qa and multi_doc_qa need a non-empty {@code question}; {@code reference} is optional.</li>
 *   <li>{@code system} (string), {@code raw} (boolean), and the sampling fields {@code max_new_tokens}
 *       (integer >= 1), {@code temperature} (>= 0), {@code top_p} (in (0, 1]), {@code seed} (integer)
 *       and {@code stop} (a string or an array of strings) override the run's values for this row
 *       ({@link RowSettings}).</li>
 *   <li>A string holding a NUL character or a lone surrogate (e.g. the escape {@code \ud800}, which
 *       is not Unicode text) is bad_input: tokenizers would drop or mangle it silently.</li>
 *   <li>Other fields are passed on for templates' placeholders (strings, numbers, booleans) and
 *       otherwise ignored, so rows may carry their own metadata.</li>
 * </ul>
 */
final class DocumentParser {
  private DocumentParser() {}

  /** Longest line read, in MB of UTF-8. */
  static final int MAX_LINE_MB = 32;
  private static final long MB = 1024L * 1024;

  /**
   * Strict: text after the object and a field given twice are errors, not silently dropped. Jackson
   * refuses strings over 20M characters by default, which made a valid 20 MB line "malformed";
   * strings are bounded by the line limit instead.
   */
  private static final ObjectMapper JSON = new ObjectMapper(JsonFactory.builder()
      .streamReadConstraints(StreamReadConstraints.builder().maxStringLength((int) (MAX_LINE_MB * MB)).build())
      .build())
      .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
      .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION);

  /** A reason a row is bad; becomes the row's error text. */
  static final class BadInput extends Exception {
    BadInput(String message) {
      super(message, null, false, false);
    }
  }

  /** {@link #parse(String, boolean, String, String, long, PromptTemplate)} for a run without a prompt template. */
  static List<Row> parse(String value, boolean validUtf8, String fileName, String filePath, long line) {
    return parse(value, validUtf8, fileName, filePath, line, null);
  }

  /**
   * Parses one line; {@code validUtf8} false means the raw bytes were not UTF-8. One row per object.
   *
   * @param runTemplate the run's --prompt-template, or null: rows without their own prompt are checked against it
   */
  static List<Row> parse(String value, boolean validUtf8, String fileName, String filePath, long line,
      PromptTemplate runTemplate) {
    String source = fileName + ":" + line;
    if (!validUtf8) return List.of(bad(source, filePath, line, source, true, "invalid UTF-8 in " + source));
    long bytes = utf8Length(value);
    if (bytes > MAX_LINE_MB * MB) {
      return List.of(bad(source, filePath, line, source, true, String.format(Locale.ROOT,
          "line too long (%.1f MB; limit %d MB) at %s", bytes / (double) MB, MAX_LINE_MB, source)));
    }
    JsonNode root;
    try {
      root = JSON.readTree(value);
    } catch (JsonProcessingException e) {
      return List.of(bad(source, filePath, line, source, true, "malformed JSON at " + source + ": " + message(e)));
    }
    if (root == null || !root.isArray()) return List.of(parse(root, source, filePath, line, runTemplate));
    if (root.isEmpty()) {
      return List.of(bad(source, filePath, line, source, true, "an empty JSON array at " + source
          + " (one JSON object per line, or an array of objects)"));
    }
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < root.size(); i++) rows.add(parse(root.get(i), source + "[" + i + "]", filePath, line, runTemplate));
    return rows;
  }

  /** One JSON value that should be a document object. */
  private static Row parse(JsonNode root, String source, String filePath, long line, PromptTemplate runTemplate) {
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
    if (generated) docId = ContentId.of(root);
    try {
      PromptTemplate own = rowTemplate(root);
      List<Row> messages = messages(root.get("messages"));
      if (own != null && messages != null) throw new BadInput("give either 'prompt' or 'messages', not both");
      PromptTemplate template = own != null || messages != null ? own : runTemplate;
      String task = optionalString(root, "task");
      if (task == null && template == null && messages == null) {
        throw new BadInput("missing field 'task' (or 'prompt', the row's own prompt)");
      }
      if (task != null && !JobSchemas.TASKS.contains(task)) {
        throw new BadInput("unknown task '" + task + "' (known: " + String.join(", ", JobSchemas.TASKS) + ")");
      }
      String text = optionalString(root, "text");
      List<Row> documents = documents(root.get("documents"));
      if (text != null && documents != null) throw new BadInput("give either 'text' or 'documents', not both");
      String question = optionalString(root, "question");
      if (messages != null && (text != null || documents != null || question != null)) {
        // a conversation is the whole prompt (no placeholders): the other fields would be dropped without a word
        throw new BadInput("give either 'messages' or 'text' / 'documents' / 'question', not both: 'messages' is the "
            + "whole prompt, so " + (text != null ? "'text'" : documents != null ? "'documents'" : "'question'")
            + " would be ignored");
      }
      if (template == null && messages == null) {
        if (task.equals("multi_doc_qa") && documents == null) {
          throw new BadInput("task multi_doc_qa needs a non-empty 'documents' array of {title, text}");
        }
        if (text == null && documents == null) throw new BadInput("missing field 'text' (or 'documents')");
        if (!task.equals("summary") && question == null) throw new BadInput("task " + task + " needs a 'question'");
      }
      String reference = optionalString(root, "reference");
      RowSettings settings = RowSettings.of(root);
      if (messages != null && Boolean.TRUE.equals(settings.raw())) {
        throw new BadInput("'raw' does not apply to 'messages': the chat template is what makes a conversation a prompt");
      }
      Map<String, String> fields = fields(root);
      if (template != null) checkTemplate(template, own != null, text, documents, question, fields);
      long size = text != null ? text.length() : 0;
      if (documents != null) for (Row d : documents) size += d.getString(1).length();
      if (own != null) size += own.source().length();
      if (messages != null) for (Row m : messages) size += m.getString(1).length();
      return row(docId, generated, source, filePath, line, task, text,
          documents == null ? null : JobSchemas.seq(documents), question, reference, null, null, size,
          own == null ? null : own.source(), settings.system(), settings.raw(), settings.maxNewTokens(),
          settings.temperature(), settings.topP(), settings.seed(),
          settings.stop() == null ? null : JobSchemas.seq(settings.stop()), JobSchemas.map(fields),
          messages == null ? null : JobSchemas.seq(messages), jsonSchema(root));
    } catch (BadInput e) {
      return bad(docId, filePath, line, source, generated, e.getMessage());
    }
  }

  /**
   * Jackson's message without its internals: the "[Source: REDACTED (`StreamReadFeature...` disabled);
   * line: 1, column: 9]" of a start marker becomes "column 9", and hints that name Jackson features
   * (which a user cannot turn on) are dropped. The column where parsing stopped is added.
   */
  static String message(JsonProcessingException e) {
    String m = String.valueOf(e.getOriginalMessage())
        .replaceAll("\\[Source: [^\\]]*?line: \\d+, column: (\\d+)\\]", "column $1")
        .replaceAll(", from `[^`]*`", "")
        .replaceAll("\\s*\\(bound as `[^`]*`\\)", "")
        .replaceAll(":? *(not allowed as per|enable) `[^`]*`( to allow)?", "")
        .replaceAll("\\s*\\((or )?`[^`]*`[^)]*\\)", "")
        .replaceAll("\\s+", " ").trim();
    if (e.getLocation() != null && e.getLocation().getColumnNr() > 0) m += " (column " + e.getLocation().getColumnNr() + ")";
    return m;
  }

  /** Bytes of {@code s} in UTF-8, counted without encoding; a line well under the limit is not counted. */
  private static long utf8Length(String s) {
    if ((long) s.length() * 3 <= MAX_LINE_MB * MB) return s.length(); // at most 3 bytes per char: cannot be over
    long n = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
        n += 4;
        i++;
      } else {
        n += 3;
      }
    }
    return n;
  }

  /** A string field's text, refused when it holds a NUL or a lone surrogate (not Unicode text). */
  private static String checkedText(String field, String s) throws BadInput {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == 0) throw new BadInput("field '" + field + "' holds a NUL character (\\u0000) at character " + i);
      if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        throw new BadInput(String.format(Locale.ROOT,
            "field '%s' holds a lone surrogate \\u%04x at character %d (not valid Unicode text)", field, (int) c, i));
      }
    }
    return s;
  }

  private static Row bad(String docId, String filePath, long line, String source, boolean generated, String error) {
    return row(docId, generated, source, filePath, line, null, null, null, null, null,
        JobSchemas.BAD_INPUT, error, 0L, null, null, null, null, null, null, null, null, null, null, null);
  }

  /** The row's own {@code prompt}, parsed; null when it has none. */
  private static PromptTemplate rowTemplate(JsonNode root) throws BadInput {
    String prompt = optionalString(root, "prompt");
    if (prompt == null) return null;
    try {
      return PromptTemplate.parse(prompt);
    } catch (IllegalArgumentException e) {
      throw new BadInput("field 'prompt': " + e.getMessage());
    }
  }

  /** Every placeholder of the template has a value in this row (the run's template is checked per row too). */
  private static void checkTemplate(PromptTemplate t, boolean own, String text, List<Row> documents, String question,
      Map<String, String> fields) throws BadInput {
    List<PromptBuilder.Document> docs = null;
    if (documents != null) {
      docs = new ArrayList<>();
      for (Row d : documents) docs.add(new PromptBuilder.Document(d.getString(0), d.getString(1)));
    }
    PromptBuilder.Values v = new PromptBuilder.Values(text, docs, question, fields);
    for (String name : t.placeholders()) {
      try {
        v.get(name);
      } catch (IllegalArgumentException e) {
        throw new BadInput((own ? "field 'prompt': " : "--prompt-template: ") + e.getMessage());
      }
    }
  }

  /** Fields a template may name besides text, documents and question: the row's strings, numbers and booleans as text. */
  private static Map<String, String> fields(JsonNode root) throws BadInput {
    Map<String, String> m = new TreeMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      if (NOT_FIELDS.contains(e.getKey())) continue;
      JsonNode n = e.getValue();
      if (n.isTextual()) m.put(e.getKey(), checkedText(e.getKey(), n.asText()));
      else if (n.isNumber() || n.isBoolean()) m.put(e.getKey(), n.asText());
    }
    return m;
  }

  /** Columns of their own in PARSED (text can be 32 MB: not copied twice) and the template itself. */
  private static final java.util.Set<String> NOT_FIELDS = java.util.Set.of("text", "documents", "question", "prompt",
      "messages", "json_schema");

  /**
   * The row's {@code json_schema} (a string holding a JSON schema, docs/structured-output.md), checked and
   * compacted; null when absent. A schema outside the supported subset is this row's bad_input, naming the keyword.
   */
  private static String jsonSchema(JsonNode root) throws BadInput {
    JsonNode n = root.get("json_schema");
    if (n == null || n.isNull()) return null;
    if (!n.isTextual()) throw new BadInput("field 'json_schema' must be a string holding a JSON schema, not " + kind(n));
    try {
      return io.longsieve.structured.OutputSchema.parse(n.asText()).canonical();
    } catch (io.longsieve.structured.SchemaException e) {
      throw new BadInput("field 'json_schema': " + e.getMessage());
    }
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
      return checkedText("doc_id", s);
    }
    if (n.isIntegralNumber()) return n.asText();
    throw new BadInput("field 'doc_id' must be a string or an integer, not " + kind(n));
  }

  /** A string field's value; null when absent or JSON null; empty or blank is an error. */
  static String optionalString(JsonNode root, String field) throws BadInput {
    JsonNode n = root.get(field);
    if (n == null || n.isNull()) return null;
    if (!n.isTextual()) throw new BadInput("field '" + field + "' must be a string, not " + kind(n));
    String s = n.asText();
    if (s.isBlank()) throw new BadInput("field '" + field + "' is empty");
    return checkedText(field, s);
  }

  private static final java.util.Set<String> ROLES = java.util.Set.of("system", "user", "assistant");

  /**
   * messages as rows of {@link JobSchemas#MESSAGE}; null when absent. Roles system, user, assistant;
   * the last turn is the user's, since the model answers it.
   */
  private static List<Row> messages(JsonNode n) throws BadInput {
    if (n == null || n.isNull()) return null;
    if (!n.isArray()) throw new BadInput("field 'messages' must be an array of {role, content}, not " + kind(n));
    if (n.isEmpty()) throw new BadInput("field 'messages' is empty");
    List<Row> out = new ArrayList<>();
    for (int i = 0; i < n.size(); i++) {
      JsonNode m = n.get(i);
      if (!m.isObject()) throw new BadInput("messages[" + i + "] must be an object {role, content}, not " + kind(m));
      String role;
      String content;
      try {
        role = optionalString(m, "role");
        content = optionalString(m, "content");
      } catch (BadInput e) {
        throw new BadInput("messages[" + i + "]: " + e.getMessage());
      }
      if (role == null || !ROLES.contains(role)) {
        throw new BadInput("messages[" + i + "]: 'role' must be system, user or assistant, not " + (role == null ? "missing" : "'" + role + "'"));
      }
      if (content == null) throw new BadInput("messages[" + i + "]: missing field 'content'");
      out.add(RowFactory.create(role, content));
    }
    if (!out.get(out.size() - 1).getString(0).equals("user")) {
      throw new BadInput("the last of 'messages' must be the user's (the model answers it)");
    }
    return out;
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

  static String kind(JsonNode n) {
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
