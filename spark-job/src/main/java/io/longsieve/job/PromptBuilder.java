package io.longsieve.job;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The user message of each row. The engine wraps it in the model's chat template
 * ({@code GenerationRequest.chat}) unless the row or run asks for {@code raw}, so the text here is
 * only the instruction, the document(s) and the question.
 *
 * <p>Which template a row gets, first that applies: the row's own {@code prompt} column, the run's
 * {@code --prompt-template}, the preset of the row's {@code task} ({@link #PRESETS}). All three are
 * {@link PromptTemplate}s, filled in the same way:
 * <ul>
 *   <li>{@code {text}}: the row's text;</li>
 *   <li>{@code {documents}}: its documents, "Document 1: title" headers, one blank line between them;</li>
 *   <li>{@code {question}}: its question;</li>
 *   <li>{@code {name}}: any other string, number or boolean field of the row, as text.</li>
 * </ul>
 * Values lose their leading and trailing white space; a placeholder the row has no value for is a
 * {@code bad_input} row naming it. The document part (the first {@code {text}} or {@code {documents}})
 * is kept apart ({@link Prompt#body}) so --truncate can cut it alone and leave the instruction and
 * the question whole.
 */
public final class PromptBuilder {
  private PromptBuilder() {}

  /**
   * The task presets, written as templates: what longsieve-needle was trained on (suite-text.json,
   * kept equal by PromptFormatParityTest). A task's {@code _documents} form is for rows that give
   * {@code documents} instead of {@code text}.
   */
  public static final Map<String, String> PRESETS;

  static {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("summary", "Summarize the following document in a few sentences, keeping the main facts.\n\n{text}\n\nSummary:");
    m.put("summary_documents",
        "Summarize the following documents in a few sentences, keeping the main facts.\n\n{documents}\n\nSummary:");
    m.put("qa", "Answer the question using only the document below. Answer briefly.\n\nDocument:\n{text}"
        + "\n\nQuestion: {question}\nAnswer:");
    m.put("qa_documents", "Answer the question using only the document below. Answer briefly.\n\nDocument:\n{documents}"
        + "\n\nQuestion: {question}\nAnswer:");
    m.put("multi_doc_qa", "Answer the question using only the documents below. Some documents may be irrelevant. "
        + "Answer briefly.\n\n{documents}\n\nQuestion: {question}\nAnswer:");
    PRESETS = java.util.Collections.unmodifiableMap(m);
  }

  private static final Map<String, PromptTemplate> PARSED_PRESETS = new LinkedHashMap<>();

  static {
    PRESETS.forEach((k, v) -> PARSED_PRESETS.put(k, PromptTemplate.parse(v)));
  }

  /** A titled document of a multi-document row. */
  public record Document(String title, String text) {}

  /**
   * What a row gives its template.
   *
   * @param text      the text, or null
   * @param documents the documents, or null
   * @param question  the question, or null
   * @param fields    every other scalar field of the row, as text
   */
  public record Values(String text, List<Document> documents, String question, Map<String, String> fields) {
    public Values {
      fields = fields == null ? Map.of() : fields;
    }

    /** A placeholder's value. @throws IllegalArgumentException when the row has none */
    String get(String name) {
      String v = switch (name) {
        case "text" -> text;
        case "documents" -> documents == null ? null : documentsBody(documents);
        case "question" -> question;
        default -> fields.get(name);
      };
      if (v == null) {
        throw new IllegalArgumentException("the prompt template's {" + name + "} has no value: the row has no "
            + (name.equals("documents") ? "'documents' array" : "string, number or boolean field '" + name + "'"));
      }
      return v.strip();
    }
  }

  /**
   * A prompt in three parts; {@link #text()} is what the model reads.
   *
   * @param head instruction before the document(s)
   * @param body the document(s), the only part --truncate shortens
   * @param tail what follows the document(s): the question and the answer cue
   */
  public record Prompt(String head, String body, String tail) {
    public String text() {
      return head + body + tail;
    }

    public Prompt withBody(String b) {
      return new Prompt(head, b, tail);
    }
  }

  /** The preset of a task for a row with text ({@code documents} false) or with documents. */
  public static PromptTemplate preset(String task, boolean documents) {
    PromptTemplate t = documents ? PARSED_PRESETS.get(task + "_documents") : null;
    if (t == null) t = PARSED_PRESETS.get(task);
    if (t == null) throw new IllegalArgumentException("unknown task '" + task + "' (known: " + JobSchemas.TASKS + ")");
    return t;
  }

  /**
   * The prompt for a validated task row: {@code text} or {@code documents} (one of them non-null), and
   * a question for qa and multi_doc_qa.
   */
  public static Prompt build(String task, String text, List<Document> documents, String question) {
    return build(preset(task, text == null), new Values(text, documents, question, Map.of()));
  }

  /**
   * The row's prompt from {@code template}.
   *
   * @throws IllegalArgumentException naming a placeholder the row has no value for
   */
  public static Prompt build(PromptTemplate template, Values values) {
    return template.render(values::get);
  }

  /** "Document 1: title" headers, one blank line between documents; an untitled one is just numbered. */
  static String documentsBody(List<Document> documents) {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < documents.size(); i++) {
      Document d = documents.get(i);
      if (i > 0) sb.append("\n\n");
      sb.append("Document ").append(i + 1);
      if (d.title() != null && !d.title().isBlank()) sb.append(": ").append(d.title().strip());
      sb.append('\n').append(d.text().strip());
    }
    return sb.toString();
  }
}
