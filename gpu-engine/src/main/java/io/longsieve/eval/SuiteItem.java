package io.longsieve.eval;

import java.util.List;

/**
 * One document of the quality suite: a row of the Spark job's input (doc_id, task, text or
 * documents, question, reference) plus what scoring needs.
 *
 * @param docId        stable id, e.g. "niah_single-2048-3"
 * @param task         the job's task: qa, multi_doc_qa or summary
 * @param kind         the suite task: niah_single, niah_multikey, niah_multivalue, niah_multiquery, vt, mdqa, summary
 * @param text         the document (qa, summary); null for multi_doc_qa
 * @param documents    titled documents (multi_doc_qa); empty otherwise
 * @param question     the question; null for summary
 * @param reference    the answer text the model is trained to write
 * @param expected     the answer items scoring looks for (one value, a list, or the facts in order)
 * @param depth        where the asked-about needle sits, 0 (start) .. 1 (end)
 * @param length       nominal length in tokens (a multiple of the training length; the prompt stays below it)
 * @param promptTokens the user message's measured length (by the suite's token counter)
 */
public record SuiteItem(
    String docId,
    String task,
    String kind,
    String text,
    List<Document> documents,
    String question,
    String reference,
    List<String> expected,
    double depth,
    int length,
    int promptTokens) {

  /** A titled document of a multi-document question. */
  public record Document(String title, String text) {}

  public SuiteItem {
    documents = documents == null ? List.of() : List.copyOf(documents);
    expected = List.copyOf(expected);
  }

  /** The same item labelled with a nominal length (e.g. 2 x the training length). */
  public SuiteItem withLength(int nominal) {
    return new SuiteItem(docId, task, kind, text, documents, question, reference, expected, depth, nominal, promptTokens);
  }

  public SuiteItem withDocId(String id) {
    return new SuiteItem(id, task, kind, text, documents, question, reference, expected, depth, length, promptTokens);
  }
}
