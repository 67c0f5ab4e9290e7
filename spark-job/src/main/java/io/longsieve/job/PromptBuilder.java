package io.longsieve.job;

import java.util.List;

/**
 * The user message for each task. The engine wraps it in the model's chat template
 * ({@code GenerationRequest.chat}), so the text here is only the instruction, the document(s) and the
 * question. The document part is kept separate ({@link Prompt#body}) so --truncate can cut it alone
 * and leave the instruction and the question whole.
 */
public final class PromptBuilder {
  private PromptBuilder() {}

  /** A titled document of a multi-document row. */
  public record Document(String title, String text) {}

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

  /**
   * The prompt for a validated row: {@code text} or {@code documents} (one of them non-null), and a
   * question for qa and multi_doc_qa.
   */
  public static Prompt build(String task, String text, List<Document> documents, String question) {
    String body = text != null ? text.strip() : documentsBody(documents);
    return switch (task) {
      case "summary" -> new Prompt(
          "Summarize the following " + (documents != null && documents.size() > 1 ? "documents" : "document")
              + " in a few sentences, keeping the main facts.\n\n",
          body,
          "\n\nSummary:");
      case "qa" -> new Prompt(
          "Answer the question using only the document below. Answer briefly.\n\nDocument:\n",
          body,
          "\n\nQuestion: " + question.strip() + "\nAnswer:");
      case "multi_doc_qa" -> new Prompt(
          "Answer the question using only the documents below. Some documents may be irrelevant. "
              + "Answer briefly.\n\n",
          body,
          "\n\nQuestion: " + question.strip() + "\nAnswer:");
      default -> throw new IllegalArgumentException("unknown task '" + task + "'");
    };
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
