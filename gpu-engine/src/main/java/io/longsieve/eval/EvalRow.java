package io.longsieve.eval;

import java.io.Serializable;

/**
 * One cell of the results: a task at a length under a policy. Field names are the Parquet
 * columns (run_id, task, length, policy, accuracy, attended_fraction, ms_per_doc, n_docs).
 *
 * @param accuracy         mean score, 0..1
 * @param attendedFraction mean attended fraction over the documents
 * @param msPerDoc         mean wall time per document
 */
public record EvalRow(String runId, String task, int length, String policy, double accuracy, double attendedFraction,
    double msPerDoc, int nDocs, int nErrors) implements Serializable {}
