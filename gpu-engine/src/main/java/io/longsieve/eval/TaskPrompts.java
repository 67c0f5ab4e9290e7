package io.longsieve.eval;

import java.util.ArrayList;
import java.util.List;

/**
 * The user message per job task — what the Spark job puts in the chat template's user turn, and
 * what longsieve-needle was trained on (tools/train/suite.py#user_message builds the same):
 * <pre>
 *   qa            Answer the question using only the document below. ...\n\nDocument:\n{text}\n\nQuestion: {question}\nAnswer:
 *   multi_doc_qa  Answer the question using only the documents below. ...\n\nDocument 1: {title}\n{text}\n\n...\n\nQuestion: {question}\nAnswer:
 *   summary       Summarize the following document in a few sentences, keeping the main facts.\n\n{text}\n\nSummary:
 * </pre>
 * The layouts live in suite-text.json ("prompts").
 */
public final class TaskPrompts {

  private final SuiteText text;

  public TaskPrompts(SuiteText text) {
    this.text = text;
  }

  public static TaskPrompts standard() {
    return new TaskPrompts(SuiteText.load());
  }

  /** The user message for one row; documents may be empty except for multi_doc_qa. */
  public String userMessage(String task, String body, List<SuiteItem.Document> documents, String question) {
    switch (task) {
      case "qa":
        return text.prompt("qa").replace("{text}", body).replace("{question}", question);
      case "summary":
        return text.prompt("summary").replace("{text}", body);
      case "multi_doc_qa": {
        List<String> parts = new ArrayList<>();
        for (int i = 0; i < documents.size(); i++) {
          SuiteItem.Document d = documents.get(i);
          parts.add(text.prompt("multi_doc_qa_document").replace("{index}", Integer.toString(i + 1))
              .replace("{title}", d.title()).replace("{text}", d.text()));
        }
        String docs = String.join(text.prompt("multi_doc_qa_separator"), parts);
        return text.prompt("multi_doc_qa").replace("{documents}", docs).replace("{question}", question);
      }
      default:
        throw new IllegalArgumentException("unknown task '" + task + "' (qa, multi_doc_qa, summary)");
    }
  }

  public String userMessage(SuiteItem item) {
    return userMessage(item.task(), item.text(), item.documents(), item.question());
  }
}
