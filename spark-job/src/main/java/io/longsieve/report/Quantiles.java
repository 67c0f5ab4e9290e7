package io.longsieve.report;

import static org.apache.spark.sql.functions.avg;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.max;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;

/**
 * The one definition of a run's latency quantiles. The report page shows them and writes them to
 * {@code report/<run_id>.quantiles.json}, which notebooks/longsieve_stats.ipynb reads instead of
 * computing its own: two computations (Spark's approximate percentile here, pandas' interpolation
 * there) gave two different p99s for one run.
 *
 * <p>Exact (Spark's {@code percentile}: linear interpolation between the closest ranks, numpy's and
 * pandas' default), over every document that has the column. Exact costs one sort of a double per
 * document, a few MB at 100,000 documents.
 */
public final class Quantiles {
  private Quantiles() {}

  /** The quantiles every summary carries, in this order. */
  public static final List<String> NAMES = List.of("p50", "p90", "p95", "p99");
  static final double[] LEVELS = {0.5, 0.9, 0.95, 0.99};

  /** How many documents had the column, their mean, the quantiles in {@link #NAMES} order, and the largest. */
  public record Summary(long count, double mean, double[] values, double max) {
    static final Summary EMPTY = new Summary(0, Double.NaN, nan(), Double.NaN);

    public double get(String name) {
      int i = NAMES.indexOf(name);
      if (i < 0) throw new IllegalArgumentException("no quantile " + name + " (have " + NAMES + ")");
      return values[i];
    }

    /** count, mean, p50 … p99, max, as the JSON file holds them (null for no value). */
    Map<String, Object> toMap() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("documents", count);
      m.put("mean", finite(mean));
      for (int i = 0; i < NAMES.size(); i++) m.put(NAMES.get(i), finite(values[i]));
      m.put("max", finite(max));
      return m;
    }
  }

  /** The four aggregate columns {@link #read} expects, in order: count, mean, quantiles, max. */
  static Column[] columns(String column) {
    Column v = col(column).cast("double");
    Column levels = functions.array(java.util.Arrays.stream(LEVELS).mapToObj(functions::lit).toArray(Column[]::new));
    return new Column[] {count(v), avg(v), functions.call_function("percentile", v, levels), max(v)};
  }

  /** The summary in {@code r}'s columns {@code from} … {@code from + 3}, as {@link #columns} made them. */
  static Summary read(Row r, int from) {
    long n = r.getLong(from);
    if (n == 0) return Summary.EMPTY;
    List<Object> q = r.getList(from + 2);
    double[] values = new double[LEVELS.length];
    for (int i = 0; i < values.length; i++) values[i] = ((Number) q.get(i)).doubleValue();
    return new Summary(n, r.getDouble(from + 1), values, ((Number) r.get(from + 3)).doubleValue());
  }

  /**
   * The run's quantiles as {@code report/<run_id>.quantiles.json} holds them: {@code total_ms} and
   * {@code ttft_ms} over every document, and {@code total_ms_by_policy}.
   */
  static String json(RunAggregates a) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("run_id", a.runId());
    m.put("method", "exact: linear interpolation between the closest ranks (numpy/pandas default)");
    m.put("total_ms", a.totalMs().quantiles().toMap());
    m.put("ttft_ms", a.ttftMs().quantiles().toMap());
    Map<String, Object> byPolicy = new LinkedHashMap<>();
    for (RunAggregates.PolicyRow p : a.policies()) byPolicy.put(p.policy(), p.totalMs().toMap());
    m.put("total_ms_by_policy", byPolicy);
    try {
      return new com.fasterxml.jackson.databind.ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(m);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException("quantiles of run " + a.runId() + " as JSON: " + e.getMessage(), e);
    }
  }

  private static double[] nan() {
    double[] v = new double[LEVELS.length];
    java.util.Arrays.fill(v, Double.NaN);
    return v;
  }

  private static Double finite(double v) {
    return Double.isNaN(v) || Double.isInfinite(v) ? null : v;
  }
}
