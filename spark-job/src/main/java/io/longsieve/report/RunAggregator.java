package io.longsieve.report;

import static org.apache.spark.sql.functions.avg;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.countDistinct;
import static org.apache.spark.sql.functions.expr;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.max;
import static org.apache.spark.sql.functions.min;
import static org.apache.spark.sql.functions.sum;
import static org.apache.spark.sql.functions.when;

import io.longsieve.job.JobSchemas;
import io.longsieve.report.RunAggregates.BackendRow;
import io.longsieve.report.RunAggregates.Distribution;
import io.longsieve.report.RunAggregates.ErrorRow;
import io.longsieve.report.RunAggregates.Errors;
import io.longsieve.report.RunAggregates.ExecutorRow;
import io.longsieve.report.RunAggregates.LayerFractions;
import io.longsieve.report.RunAggregates.PartitionRow;
import io.longsieve.report.RunAggregates.PolicyRow;
import io.longsieve.report.RunAggregates.Summary;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * Turns one run's stats and outputs into {@link RunAggregates} with Spark aggregations; only aggregates reach the driver
 * (bins, percentiles, group sums, a capped sample), so a run of 100,000 documents costs the same page as one of ten.
 */
final class RunAggregator {

  /** Status of a document that produced an answer; every other status is an error of some kind. */
  static final String OK = JobSchemas.OK;
  static final int HISTOGRAM_BINS = 40;
  /** Most points drawn on a scatter plot; above it the documents are sampled (the median line still sees all). */
  static final int SCATTER_CAP = 1500;
  /** Fewest documents in an input-length bin for its median to be drawn (fewer make a zigzag, not a trend). */
  static final int MEDIAN_MIN = 5;
  static final int ERROR_ROWS = 50;
  static final int EXECUTOR_ROWS = 200;

  /** Every stats row of the run: executors' busy time counts rows the engine never saw (parsing, duplicates). */
  private final Dataset<Row> stats;
  /** Rows the engine ran (ok and engine_error): the job leaves backend null on the others. */
  private final Dataset<Row> engine;
  private final Dataset<Row> outputs;

  /** Both datasets hold one run only and have the job's column names (missing optional columns read as null). */
  RunAggregator(Dataset<Row> stats, Dataset<Row> outputs) {
    this.stats = stats;
    this.engine = stats.where(col("backend").isNotNull());
    this.outputs = outputs;
  }

  RunAggregates aggregate(String runId, RunAggregates.Eval eval) {
    return new RunAggregates(runId, summary(), distribution("total_ms"), distribution("ttft_ms"),
        rateSeries(expr("try_divide((output_tokens - 1) * 1000.0, decode_ms)"), col("output_tokens").gt(1).and(col("decode_ms").gt(0))),
        rateSeries(expr("try_divide(input_tokens * 1000.0, prefill_ms)"), col("prefill_ms").gt(0)),
        layerFractions(), policies(), eval, errors(), executors(), slowestPartitions());
  }

  private Summary summary() {
    Map<String, Long> byStatus = new LinkedHashMap<>();
    long documents = 0;
    for (Row r : outputs.groupBy("status").count().orderBy(col("count").desc()).collectAsList()) {
      byStatus.put(r.isNullAt(0) ? "(none)" : r.getString(0), r.getLong(1));
      documents += r.getLong(1);
    }
    Row t = stats.agg(sum("input_tokens"), sum("output_tokens"), sum("total_ms")).first();
    List<BackendRow> backends = new ArrayList<>();
    for (Row r : engine.groupBy("backend", "device").count().orderBy(col("count").desc()).limit(50).collectAsList()) {
      backends.add(new BackendRow(str(r, 0), str(r, 1), r.getLong(2)));
    }
    return new Summary(documents, byStatus, lng(t, 0), lng(t, 1), dbl(t, 2), backends, prefixSaving());
  }

  /** Rows and tokens that came from kept prefixes, and the prefill time they would have cost at the full rows' rate. */
  private RunAggregates.PrefixSaving prefixSaving() {
    Column reused = expr("coalesce(prefix_tokens_reused, 0)");
    Row r = engine.agg(sum(when(reused.gt(0), 1).otherwise(0)), sum(reused),
        sum(when(reused.equalTo(0).and(col("prefill_ms").isNotNull()), col("prefill_ms"))),
        sum(when(reused.equalTo(0).and(col("prefill_ms").isNotNull()), col("input_tokens")))).first();
    long tokens = lng(r, 1);
    double fullMs = dbl(r, 2), fullTokens = dbl(r, 3);
    double saved = fullTokens > 0 && !Double.isNaN(fullMs) ? tokens * fullMs / fullTokens : Double.NaN;
    return new RunAggregates.PrefixSaving(lng(r, 0), tokens, saved);
  }

  /**
   * Percentiles over every document, and a histogram from the minimum to 1.5 × p99 (slower ones in the last bin); the
   * bins are log-spaced when p99 is over 20 × the minimum, as latencies of mixed-length documents usually are.
   */
  private Distribution distribution(String column) {
    Dataset<Row> v = engine.select(col(column).cast("double").as("v")).where(col("v").isNotNull());
    Column[] q4 = Quantiles.columns("v");
    Row a = v.agg(q4[0], q4[1], q4[2], q4[3], min("v")).first();
    Quantiles.Summary q = Quantiles.read(a, 0);
    long n = q.count();
    if (n == 0) {
      return Distribution.empty();
    }
    double p99 = q.get("p99");
    double minV = a.getDouble(4);
    double maxV = q.max();
    double top = Math.min(maxV, p99 * 1.5);
    boolean log = minV > 0 && top > 20 * minV;
    // bin over t = v or log10(v); the edges are turned back into values below
    double lo = log ? Math.log10(minV) : Math.min(0, minV);
    double hi = log ? Math.log10(top) : top;
    if (hi <= lo) {
      hi = lo + 1;
    }
    double width = (hi - lo) / HISTOGRAM_BINS;
    String t = log ? "log10(greatest(v, " + minV + "))" : "v";
    Column bin = expr("least(greatest(cast(floor((" + t + " - " + lo + ") / " + width + ") as int), 0), "
        + (HISTOGRAM_BINS - 1) + ")");
    long[] counts = new long[HISTOGRAM_BINS];
    for (Row r : v.groupBy(bin.as("bin")).count().collectAsList()) {
      counts[r.getInt(0)] += r.getLong(1);
    }
    double[] edges = new double[HISTOGRAM_BINS + 1];
    for (int i = 0; i <= HISTOGRAM_BINS; i++) {
      edges[i] = log ? Math.pow(10, lo + i * width) : lo + i * width;
    }
    return new Distribution(q, edges, counts, log);
  }

  /**
   * Per policy: a sample of (input tokens, rate) points, capped at {@link #SCATTER_CAP} in all, and the median rate
   * per half-octave of input length over every document (bins of at least {@link #MEDIAN_MIN}).
   */
  private List<ScatterChart.Series> rateSeries(Column rate, Column valid) {
    Dataset<Row> pts = engine.where(valid.and(col("input_tokens").gt(0)))
        .select(col("policy"), col("input_tokens").cast("double").as("x"), rate.cast("double").as("y"));
    long n = pts.count();
    if (n == 0) {
      return List.of();
    }
    double fraction = Math.min(1.0, SCATTER_CAP * 1.1 / n);
    Dataset<Row> sample = fraction < 1 ? pts.sample(false, fraction, 42).limit(SCATTER_CAP) : pts;
    Map<String, List<double[]>> points = new LinkedHashMap<>();
    for (Row r : sample.collectAsList()) {
      points.computeIfAbsent(str(r, 0), k -> new ArrayList<>()).add(new double[] {r.getDouble(1), r.getDouble(2)});
    }
    Map<String, List<double[]>> lines = new LinkedHashMap<>();
    Column bucket = expr("floor(log2(x) * 2) / 2");
    for (Row r : pts.groupBy(col("policy"), bucket.as("b"))
        .agg(expr("percentile_approx(y, 0.5, 1000)").as("m"), count(lit(1)).as("n")).where(col("n").geq(MEDIAN_MIN))
        .orderBy("policy", "b").collectAsList()) {
      lines.computeIfAbsent(str(r, 0), k -> new ArrayList<>())
          .add(new double[] {Math.pow(2, r.getDouble(1) + 0.25), r.getDouble(2)});
    }
    List<ScatterChart.Series> out = new ArrayList<>();
    TreeSet<String> policies = new TreeSet<>(points.keySet());
    policies.addAll(lines.keySet());
    for (String policy : policies) {
      List<double[]> p = points.getOrDefault(policy, List.of());
      List<double[]> l = lines.getOrDefault(policy, List.of());
      out.add(new ScatterChart.Series(policy, p.stream().mapToDouble(d -> d[0]).toArray(),
          p.stream().mapToDouble(d -> d[1]).toArray(), l.stream().mapToDouble(d -> d[0]).toArray(),
          l.stream().mapToDouble(d -> d[1]).toArray()));
    }
    return out;
  }

  private LayerFractions layerFractions() {
    List<Row> rows = engine.where(col("selected_fraction_by_layer").isNotNull())
        .select(col("policy"), expr("posexplode(selected_fraction_by_layer) as (layer, f)"))
        .groupBy("policy", "layer").agg(avg("f")).collectAsList();
    TreeSet<String> policies = new TreeSet<>();
    int layers = 0;
    for (Row r : rows) {
      policies.add(str(r, 0));
      layers = Math.max(layers, r.getInt(1) + 1);
    }
    List<String> names = new ArrayList<>(policies);
    double[][] means = new double[names.size()][layers];
    for (double[] m : means) {
      java.util.Arrays.fill(m, Double.NaN);
    }
    for (Row r : rows) {
      means[names.indexOf(str(r, 0))][r.getInt(1)] = dbl(r, 2);
    }
    return new LayerFractions(names, layers, means);
  }

  private List<PolicyRow> policies() {
    List<PolicyRow> out = new ArrayList<>();
    Column[] total = Quantiles.columns("total_ms"); // columns 3 to 6
    for (Row r : engine.groupBy("policy").agg(count(lit(1)), sum(when(col("status").equalTo(OK), 1).otherwise(0)),
            total[0], total[1], total[2], total[3], avg("ttft_ms"),
            expr("try_divide(sum(input_tokens) * 1000.0, sum(prefill_ms))"),
            expr("try_divide(sum(greatest(output_tokens - 1, 0)) * 1000.0, sum(decode_ms))"), avg("attended_tokens_mean"),
            avg("selection_cache_hit_rate"), expr("try_divide(sum(kv_bytes_after), sum(kv_bytes_before))"),
            expr("try_divide(sum(selection_ms), sum(selection_ms + attention_ms))"))
        .orderBy("policy").collectAsList()) {
      out.add(new PolicyRow(str(r, 0), r.getLong(1), lng(r, 2), Quantiles.read(r, 3), dbl(r, 7), dbl(r, 8), dbl(r, 9),
          dbl(r, 10), dbl(r, 11), dbl(r, 12), dbl(r, 13)));
    }
    return out;
  }

  private Errors errors() {
    Dataset<Row> failed = outputs.where(col("status").isNull().or(col("status").notEqual(OK)))
        .select(col("status"), expr("substring(coalesce(error, ''), 1, 500)").as("message"), col("doc_id"))
        .withColumn("pattern", expr("regexp_replace(message, '[0-9]+', '#')"));
    Dataset<Row> groups = failed.groupBy("status", "pattern")
        .agg(count(lit(1)).as("n"), min("message").as("example"), min("doc_id")).cache();
    try {
      Row totals = groups.agg(count(lit(1)), sum("n")).first();
      List<ErrorRow> rows = new ArrayList<>();
      for (Row r : groups.orderBy(col("n").desc(), col("status"), col("pattern")).limit(ERROR_ROWS)
          .select("status", "example", "n", "min(doc_id)").collectAsList()) {
        rows.add(new ErrorRow(str(r, 0), str(r, 1), r.getLong(2), str(r, 3)));
      }
      return new Errors(lng(totals, 1), totals.getLong(0), rows);
    } finally {
      groups.unpersist();
    }
  }

  private List<ExecutorRow> executors() {
    List<ExecutorRow> out = new ArrayList<>();
    for (Row r : stats.groupBy("executor_id").agg(count(lit(1)), countDistinct("partition_id"), sum("total_ms"),
            expr("sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0))"))
        .orderBy(col("sum(total_ms)").desc_nulls_last()).limit(EXECUTOR_ROWS).collectAsList()) {
      out.add(new ExecutorRow(str(r, 0), r.getLong(1), r.getLong(2), dbl(r, 3), lng(r, 4)));
    }
    return out;
  }

  private List<PartitionRow> slowestPartitions() {
    List<PartitionRow> out = new ArrayList<>();
    for (Row r : stats.groupBy("executor_id", "partition_id").agg(count(lit(1)), sum("total_ms").as("busy"))
        .orderBy(col("busy").desc_nulls_last()).limit(10).collectAsList()) {
      out.add(new PartitionRow(str(r, 0), r.isNullAt(1) ? -1 : ((Number) r.get(1)).intValue(), r.getLong(2),
          dbl(r, 3)));
    }
    return out;
  }

  static String str(Row r, int i) {
    return r.isNullAt(i) ? "(none)" : String.valueOf(r.get(i));
  }

  static long lng(Row r, int i) {
    return r.isNullAt(i) ? 0 : ((Number) r.get(i)).longValue();
  }

  static double dbl(Row r, int i) {
    return r.isNullAt(i) ? Double.NaN : ((Number) r.get(i)).doubleValue();
  }
}
