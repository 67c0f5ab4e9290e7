package io.longsieve.report;

import static org.apache.spark.sql.functions.col;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.job.JobSchemas;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataType;

/**
 * The report's structured-output section, for runs with JSON-schema rows (docs/structured-output.md):
 * how many documents closed ({@code finish_reason = json_complete}), how many of those parse as JSON
 * (Jackson; 100% unless something is wrong), how many were cut before they closed
 * ({@code json_incomplete}), and a sample of parsed answers.
 */
final class StructuredOutputs {
  private StructuredOutputs() {}

  static final int SAMPLE = 5;
  private static final ObjectMapper JSON = new ObjectMapper();

  record Data(long complete, long parsed, long incomplete, List<String[]> sample) {
    static final Data EMPTY = new Data(0, 0, 0, List.of());
  }

  static Data read(SparkSession spark, Path out, String runId) throws IOException {
    Map<String, DataType> cols = new LinkedHashMap<>();
    for (String c : List.of("doc_id", "status", "output", "finish_reason")) cols.put(c, JobSchemas.RESULT.apply(c).dataType());
    Dataset<Row> rows = RunReport.readRun(spark, new Path(out, "outputs"), runId, cols);
    Dataset<Row> complete = rows.filter(col("finish_reason").equalTo("json_complete"));
    long incomplete = rows.filter(col("status").equalTo(JobSchemas.JSON_INCOMPLETE)).count();
    long n = complete.count();
    if (n == 0 && incomplete == 0) return Data.EMPTY;
    long parsed = complete.select("output").map((MapFunction<Row, Integer>) r -> parses(r.getString(0)) ? 1 : 0,
        Encoders.INT()).reduce((org.apache.spark.api.java.function.ReduceFunction<Integer>) Integer::sum);
    List<String[]> sample = new ArrayList<>();
    for (Row r : complete.orderBy("doc_id").select("doc_id", "output").limit(SAMPLE).collectAsList()) {
      sample.add(new String[] {r.getString(0), compact(r.getString(1))});
    }
    return new Data(n, n == 0 ? 0 : parsed, incomplete, sample);
  }

  private static boolean parses(String text) {
    try {
      return text != null && JSON.readTree(text) != null;
    } catch (IOException e) {
      return false;
    }
  }

  private static String compact(String text) {
    try {
      return JSON.readTree(text).toString();
    } catch (IOException e) {
      return text;
    }
  }

  /** The section's HTML; empty when the run had no JSON-schema rows. */
  static String html(Data d) {
    if (d.complete() == 0 && d.incomplete() == 0) return "";
    StringBuilder h = new StringBuilder("<section id=\"structured\"><h2>Structured output</h2><p>");
    h.append(Html.num(d.complete())).append(" documents closed their JSON; ").append(Html.num(d.parsed()))
        .append(" of them parse (").append(d.complete() == 0 ? "-" : Html.pct((double) d.parsed() / d.complete()))
        .append("); ").append(Html.num(d.incomplete()))
        .append(" were cut before they closed (status json_incomplete: raise max_new_tokens).</p>");
    if (!d.sample().isEmpty()) {
      h.append("<table><tr><th>doc_id</th><th>answer</th></tr>");
      for (String[] s : d.sample()) {
        h.append("<tr><td>").append(Html.escape(s[0])).append("</td><td><code>").append(Html.escape(s[1]))
            .append("</code></td></tr>");
      }
      h.append("</table>");
    }
    return h.append("</section>").toString();
  }
}
