package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.countDistinct;
import static org.apache.spark.sql.functions.lit;

import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * The end of a run, before its manifest: every input row the plan counted has exactly one row in
 * outputs and one in stats, and no input file changed since it was listed. A run that fails here
 * stops with a {@link RunFault} (no manifest, so the next run on the output treats it as unfinished)
 * instead of ending with exit 0 and fewer rows than planned.
 *
 * <p>The plan's counts come from the planning pass over the input and the written rows from the
 * generation pass, a second read: they differ only when the input changed between the two (or
 * something removed committed files), which is what this check exists to catch.
 */
final class CommitCheck {
  private CommitCheck() {}

  /**
   * @param plannedRows      input rows the plan covered (repeated doc_ids included)
   * @param plannedDocuments distinct doc_ids among them
   * @throws RunFault INPUT_CHANGED naming the first changed file, OUTPUT_GONE, or INCOMPLETE with the counts
   */
  static void require(SparkSession spark, RunOptions o, InputSnapshot input, Configuration conf, long plannedRows,
      long plannedDocuments) {
    input.requireUnchanged(conf);
    LongSieveJob.requireOutput(o, conf);
    // both tables in one Spark job: (table, rows, documents)
    Dataset<Row> ids = OwnTables.run(spark, o.output(), "outputs", o.runId(), JobSchemas.OUTPUTS)
        .select(lit("outputs").as("table"), col("doc_id"))
        .union(OwnTables.run(spark, o.output(), "stats", o.runId(), JobSchemas.STATS).select(lit("stats"), col("doc_id")));
    Map<String, long[]> counts = new HashMap<>();
    for (Row r : ids.groupBy("table").agg(count(lit(1)), countDistinct("doc_id")).collectAsList()) {
      counts.put(r.getString(0), new long[] {r.getLong(1), r.getLong(2)});
    }
    for (String table : new String[] {"outputs", "stats"}) {
      long[] n = counts.getOrDefault(table, new long[2]);
      if (n[0] != plannedRows || n[1] != plannedDocuments) {
        throw new RunFault(RunFault.Kind.INCOMPLETE, "run " + o.runId() + " planned " + plannedRows + " input rows ("
            + plannedDocuments + " documents) but its " + table + " hold " + n[0] + " rows (" + n[1] + " documents)", null);
      }
    }
  }
}
