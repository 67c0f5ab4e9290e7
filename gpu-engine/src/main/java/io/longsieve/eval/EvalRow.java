package io.longsieve.eval;

import java.io.Serializable;

/**
 * One cell of the results: a task at a length under a policy. Field names are the Parquet
 * columns (run_id, task, length, policy, accuracy, attended_fraction, ms_per_doc, n_docs, n_errors,
 * kl_mean, kl_max, top1_agreement, attention_recall, n_fidelity).
 *
 * @param accuracy         mean score, 0..1
 * @param attendedFraction mean attended fraction over the documents
 * @param msPerDoc         mean wall time per document
 * @param klMean           mean over the measured documents of their mean KL(dense ‖ policy); NaN when none was measured
 * @param klMax            mean over them of their largest per-step KL
 * @param top1Agreement    mean over them of their top-1 agreement with dense attention
 * @param attentionRecall  mean over them of their attention recall (mean over layers); NaN where not measured
 * @param nFidelity        documents with a fidelity measurement
 */
public record EvalRow(String runId, String task, int length, String policy, double accuracy, double attendedFraction,
    double msPerDoc, int nDocs, int nErrors, double klMean, double klMax, double top1Agreement, double attentionRecall,
    int nFidelity) implements Serializable {

  /** A row without fidelity figures. */
  public EvalRow(String runId, String task, int length, String policy, double accuracy, double attendedFraction,
      double msPerDoc, int nDocs, int nErrors) {
    this(runId, task, length, policy, accuracy, attendedFraction, msPerDoc, nDocs, nErrors, Double.NaN, Double.NaN,
        Double.NaN, Double.NaN, 0);
  }
}
