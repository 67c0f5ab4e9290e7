package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.collect_set;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.sum;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * What a run did, from its RESULT rows: counts by status, token totals, the backends and devices
 * that ran, and the wall time.
 *
 * @param runId        the run
 * @param rows         input rows (= output rows)
 * @param byStatus     rows per status, every known status listed (0 where none)
 * @param inputTokens  prompt tokens of the rows the engine ran
 * @param outputTokens generated tokens
 * @param backends     distinct engine backends (cpu, cuda)
 * @param devices      distinct engine devices
 * @param start        run start (before reading the input)
 * @param end          run end (outputs written)
 */
public record RunSummary(String runId, long rows, Map<String, Long> byStatus, long inputTokens, long outputTokens,
                         List<String> backends, List<String> devices, Instant start, Instant end) {

  /** Aggregates the rows (on the executors; a handful of small rows come back). */
  static RunSummary of(String runId, Dataset<Row> results, Instant start, Instant end) {
    Map<String, Long> byStatus = new LinkedHashMap<>();
    for (String s : JobSchemas.STATUSES) byStatus.put(s, 0L);
    long rows = 0;
    long in = 0;
    long out = 0;
    // one Spark job: counts and tokens per status, with the backends and devices that ran each
    List<Row> groups = results.groupBy("status").agg(count(lit(1)), sum(col("input_tokens")), sum(col("output_tokens")),
        collect_set(col("backend")), collect_set(col("device"))).collectAsList();
    TreeSet<String> backends = new TreeSet<>();
    TreeSet<String> devices = new TreeSet<>();
    for (Row g : groups) {
      byStatus.merge(g.getString(0), g.getLong(1), Long::sum);
      rows += g.getLong(1);
      if (JobSchemas.OK.equals(g.getString(0)) || JobSchemas.ENGINE_ERROR.equals(g.getString(0))) {
        in += g.isNullAt(2) ? 0 : g.getLong(2);
        out += g.isNullAt(3) ? 0 : g.getLong(3);
      }
      backends.addAll(g.<String>getList(4));
      devices.addAll(g.<String>getList(5));
    }
    return new RunSummary(runId, rows, byStatus, in, out, new ArrayList<>(backends), new ArrayList<>(devices),
        start, end);
  }

  public double seconds() {
    return Math.max(1e-3, Duration.between(start, end).toMillis() / 1000.0);
  }

  /** The line printed at the end of a run. */
  public String line() {
    StringBuilder counts = new StringBuilder();
    for (Map.Entry<String, Long> e : byStatus.entrySet()) {
      if (e.getValue() == 0 && !e.getKey().equals(JobSchemas.OK)) continue;
      if (counts.length() > 0) counts.append(", ");
      counts.append(e.getKey()).append(' ').append(e.getValue());
    }
    return String.format(java.util.Locale.ROOT,
        "longsieve run %s: %d rows (%s) in %.1f s; %.2f docs/s; %.1f output tokens/s, %.1f input tokens/s; backend %s",
        runId, rows, counts, seconds(), rows / seconds(), outputTokens / seconds(), inputTokens / seconds(),
        backends.isEmpty() ? "none" : String.join(",", backends));
  }
}
