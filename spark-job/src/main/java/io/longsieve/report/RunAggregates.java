package io.longsieve.report;

import java.util.List;
import java.util.Map;

/**
 * Everything the report page shows about one run, already aggregated by Spark: a few hundred numbers at most, whatever
 * the number of documents (histogram bins, percentiles, capped samples, per-layer means, per-executor sums).
 */
record RunAggregates(
    String runId,
    Summary summary,
    Distribution totalMs,
    Distribution ttftMs,
    /* decode tokens/s against input tokens, per policy */ List<ScatterChart.Series> decodeRate,
    /* prefill tokens/s against input tokens, per policy */ List<ScatterChart.Series> prefillRate,
    LayerFractions layers,
    List<PolicyRow> policies,
    Eval eval,
    Errors errors,
    List<ExecutorRow> executors,
    List<PartitionRow> slowestPartitions) {

  /** Documents by status (from outputs), token and time sums (from stats), and which backends/devices ran them. */
  record Summary(long documents, Map<String, Long> byStatus, long inputTokens, long outputTokens, double busyMs,
      List<BackendRow> backends, PrefixSaving prefixReuse) {}

  /**
   * What prefix reuse saved: rows that started from a prompt prefix another row computed, the prompt
   * tokens they did not prefill, and an estimate of the prefill time that is (those tokens at the run's
   * prefill rate of rows that prefilled their whole prompt, a lower bound: attention grows faster than
   * the tokens); NaN when no row prefilled in full.
   */
  record PrefixSaving(long rows, long tokens, double prefillMsSaved) {}

  record BackendRow(String backend, String device, long documents) {}

  /**
   * One latency column: how many documents had it, mean, percentiles, and a histogram (overflow in the last bin) whose
   * bins are equal in log space when the values span decades ({@code logBins}).
   */
  record Distribution(Quantiles.Summary quantiles, double[] edges, long[] counts, boolean logBins) {
    static Distribution empty() {
      return new Distribution(Quantiles.Summary.EMPTY, new double[] {0, 1}, new long[] {0}, false);
    }

    long count() {
      return quantiles.count();
    }

    double mean() {
      return quantiles.mean();
    }

    double max() {
      return quantiles.max();
    }

    double q(String name) {
      return quantiles.get(name);
    }
  }

  /** Mean selected fraction per layer: (policies, layers), NaN where a policy has no value for a layer. */
  record LayerFractions(List<String> policies, int layers, double[][] means) {}

  /** Speed and sparsity of one attention policy over this run. */
  record PolicyRow(String policy, long documents, long ok, Quantiles.Summary totalMs, double meanTtftMs,
      double prefillTokPerS, double decodeTokPerS, double attendedTokensMean, double cacheHitRate, double kvRatio,
      double selectionShare) {}

  /**
   * Accuracy from the eval's Parquet, when an eval wrote one: rows for this run (or, failing that, the newest eval run,
   * named in {@code runId}).
   */
  record Eval(String runId, List<EvalRow> rows) {}

  record EvalRow(String task, long length, String policy, double accuracy, double attendedFraction,
      double msPerDoc) {}

  /**
   * Failed documents grouped by status and message pattern (numbers masked, so "prompt has 70123 tokens" and "prompt
   * has 81234 tokens" are one group), the largest groups only, with how many documents and groups there were in all.
   */
  record Errors(long documents, long groups, List<ErrorRow> rows) {}

  /** One error group: an example of its messages and the smallest doc_id in it. */
  record ErrorRow(String status, String message, long documents, String exampleDocId) {}

  record ExecutorRow(String executor, long documents, long partitions, double busyMs, long tokens) {
    double tokensPerSecond() {
      return busyMs > 0 ? tokens / (busyMs / 1000) : Double.NaN;
    }
  }

  record PartitionRow(String executor, int partition, long documents, double busyMs) {}
}
