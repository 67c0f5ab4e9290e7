package io.longsieve.job;

import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.countDistinct;
import static org.apache.spark.sql.functions.lit;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;

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
    require(spark, o, "outputs", JobSchemas.OUTPUTS, plannedRows, plannedDocuments);
    require(spark, o, "stats", JobSchemas.STATS, plannedRows, plannedDocuments);
  }

  private static void require(SparkSession spark, RunOptions o, String table, StructType schema, long plannedRows,
      long plannedDocuments) {
    Row n = OwnTables.run(spark, o.output(), table, o.runId(), schema).agg(count(lit(1)), countDistinct("doc_id")).first();
    long rows = n.getLong(0);
    long documents = n.getLong(1);
    if (rows != plannedRows || documents != plannedDocuments) {
      throw new RunFault(RunFault.Kind.INCOMPLETE, "run " + o.runId() + " planned " + plannedRows + " input rows ("
          + plannedDocuments + " documents) but its " + table + " hold " + rows + " rows (" + documents + " documents)",
          null);
    }
  }
}
