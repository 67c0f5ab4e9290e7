package io.longsieve.job;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Reads back the tables the job writes under its output root (outputs, stats, audit), always with
 * their schema from {@link JobSchemas}: a table or partition that was never written (a run of zero
 * rows, an audit with an empty sample, a run killed before its first commit) reads as no rows instead
 * of failing in Spark's schema inference ("Unable to infer schema for Parquet").
 */
public final class OwnTables {
  private OwnTables() {}

  /** {@code <output>/<table>/run_id=<runId>}, its files' columns ({@code schema} without run_id); empty when absent. */
  public static Dataset<Row> run(SparkSession spark, String output, String table, String runId, StructType schema) {
    Path partition = new Path(new Path(output, table), "run_id=" + runId);
    StructType files = withoutRunId(schema);
    if (!exists(spark, partition)) return spark.createDataFrame(List.<Row>of(), files);
    return spark.read().schema(files).parquet(partition.toString());
  }

  /** Every run of {@code <output>/<table>}, run_id as the partition column; empty when the table is absent. */
  public static Dataset<Row> all(SparkSession spark, String output, String table, StructType schema) {
    Path root = new Path(output, table);
    StructType files = withoutRunId(schema).add("run_id", org.apache.spark.sql.types.DataTypes.StringType, true);
    if (!exists(spark, root)) return spark.createDataFrame(List.<Row>of(), files);
    return spark.read().schema(files).parquet(root.toString());
  }

  /** The columns stored in a partition's files: run_id lives in the folder name. */
  public static StructType withoutRunId(StructType schema) {
    StructType t = new StructType();
    for (StructField f : schema.fields()) if (!f.name().equals("run_id")) t = t.add(f);
    return t;
  }

  private static boolean exists(SparkSession spark, Path p) {
    try {
      return p.getFileSystem(spark.sparkContext().hadoopConfiguration()).exists(p);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + p + ": " + e.getMessage(), e);
    }
  }
}
