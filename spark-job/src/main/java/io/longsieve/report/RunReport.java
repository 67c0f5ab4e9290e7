package io.longsieve.report;


import io.longsieve.job.AtomicFiles;
import io.longsieve.job.JobSchemas;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * Writes the HTML report of one run, {@code <out>/report/<run_id>.html} (and its latency quantiles,
 * {@code <run_id>.quantiles.json}, for the notebook), from {@code <out>/stats},
 * {@code <out>/outputs}, {@code <out>/runs/<run_id>.json} and, when an eval wrote it, {@code <out>/eval/results}. The job calls
 * {@link #write(SparkSession, java.nio.file.Path, String)} at the end of every run; {@code longsieve report} calls it
 * for any run. Works on any Hadoop file system (local, HDFS, S3A); the aggregation runs in Spark.
 */
public final class RunReport {

  /** Columns the report reads from stats, with the job's types; a column an older run lacks reads as null. */
  static final Map<String, DataType> STATS_COLUMNS = columns(JobSchemas.STATS_COLUMNS);
  /** Columns the report reads from outputs (the rest are answers, which the report does not show). */
  static final Map<String, DataType> OUTPUTS_COLUMNS = columns(List.of("doc_id", "status", "error"));

  private static Map<String, DataType> columns(List<String> names) {
    Map<String, DataType> out = new LinkedHashMap<>();
    for (String name : names) {
      if (!name.equals("run_id")) { // the partition column: the report reads one partition
        out.put(name, nullable(JobSchemas.RESULT.apply(name).dataType()));
      }
    }
    return out;
  }

  /** The same type with nullable array elements: Spark casts to that from either nullability, not the other way. */
  static DataType nullable(DataType type) {
    return type instanceof ArrayType a ? DataTypes.createArrayType(a.elementType(), true) : type;
  }

  private RunReport() {}

  /**
   * Writes the report of {@code runId} under a local output directory and returns the file written.
   *
   * @throws IOException when the run's data cannot be read or the report cannot be written
   */
  public static java.nio.file.Path write(SparkSession spark, java.nio.file.Path outputDir, String runId)
      throws IOException {
    write(spark, outputDir.toAbsolutePath().toUri().toString(), runId);
    return outputDir.resolve("report").resolve(runId + ".html");
  }

  /** Writes the report of {@code runId} under {@code outputUri} (any Hadoop file system URI) and returns its URI. */
  public static String write(SparkSession spark, String outputUri, String runId) throws IOException {
    Configuration conf = spark.sparkContext().hadoopConfiguration();
    Path out = new Path(outputUri);
    requireRun(conf, out, runId);
    Dataset<Row> outputs = readRun(spark, new Path(out, "outputs"), runId, OUTPUTS_COLUMNS).cache();
    // stats rows of documents that never reached outputs (a run killed between the two commits) are not the run's
    Dataset<Row> all = readRun(spark, new Path(out, "stats"), runId, STATS_COLUMNS);
    Dataset<Row> stats = all.join(outputs.select("doc_id"), all.col("doc_id").equalTo(outputs.col("doc_id")), "left_semi")
        .cache();
    try {
      RunAggregates aggregates = new RunAggregator(stats, outputs).aggregate(runId, EvalResults.read(spark, out, runId));
      String html = ReportPage.render(aggregates, ManifestFields.read(conf, out, runId), Instant.now(),
          RunOverview.read(spark, out, runId), StructuredOutputs.read(spark, out, runId));
      Path file = new Path(new Path(out, "report"), runId + ".html");
      FileSystem fs = file.getFileSystem(conf);
      // whole or not at all (a full disk leaves the previous page, never half of one), no .crc side file
      AtomicFiles.write(file, html.getBytes(StandardCharsets.UTF_8), conf);
      // the page's quantiles for the notebook, which shows these rather than computing its own
      AtomicFiles.write(new Path(new Path(out, "report"), runId + ".quantiles.json"),
          Quantiles.json(aggregates).getBytes(StandardCharsets.UTF_8), conf);
      return fs.makeQualified(file).toString();
    } finally {
      stats.unpersist();
      outputs.unpersist();
    }
  }

  /**
   * The newest run under {@code outputUri}: the most recently modified manifest in {@code runs/}, or, without
   * manifests, the most recently modified {@code stats/run_id=...} partition.
   */
  public static Optional<String> newestRunId(Configuration conf, String outputUri) throws IOException {
    Path out = new Path(outputUri);
    FileSystem fs = out.getFileSystem(conf);
    Path runs = new Path(out, "runs");
    if (fs.exists(runs)) {
      Optional<String> id = Arrays.stream(fs.listStatus(runs, p -> p.getName().endsWith(".json")))
          .max(Comparator.comparingLong(FileStatus::getModificationTime))
          .map(s -> s.getPath().getName().replaceFirst("\\.json$", ""));
      if (id.isPresent()) {
        return id;
      }
    }
    Path stats = new Path(out, "stats");
    if (!fs.exists(stats)) {
      return Optional.empty();
    }
    return Arrays.stream(fs.listStatus(stats, p -> p.getName().startsWith("run_id=")))
        .max(Comparator.comparingLong(FileStatus::getModificationTime))
        .map(s -> s.getPath().getName().substring("run_id=".length()));
  }

  /**
   * A run is known by its manifest, its start record (runs/<id>.started) or a partition of its own;
   * anything else is a typo, said as such rather than drawn as an empty page.
   */
  static void requireRun(Configuration conf, Path out, String runId) throws IOException {
    FileSystem fs = out.getFileSystem(conf);
    Path runs = new Path(out, "runs");
    for (Path p : new Path[] {new Path(runs, runId + ".json"), new Path(runs, runId + ".started"),
        new Path(new Path(out, "stats"), "run_id=" + runId), new Path(new Path(out, "outputs"), "run_id=" + runId)}) {
      if (fs.exists(p)) return;
    }
    throw new IOException("no run " + runId + " under " + out + " (no runs/" + runId + ".json, no stats or outputs of it)");
  }

  /**
   * Reads one run's partition only, so other runs (perhaps with older schemas) are never opened, with
   * the job's schema for {@code columns}: a column an older run lacks reads as null, and a run with no
   * partition (an empty input, or killed before its first commit) reads as no rows.
   */
  static Dataset<Row> readRun(SparkSession spark, Path table, String runId, Map<String, DataType> columns)
      throws IOException {
    org.apache.spark.sql.types.StructType schema = new org.apache.spark.sql.types.StructType();
    for (Map.Entry<String, DataType> c : columns.entrySet()) schema = schema.add(c.getKey(), c.getValue(), true);
    Path partition = new Path(table, "run_id=" + runId);
    if (!partition.getFileSystem(spark.sparkContext().hadoopConfiguration()).exists(partition)) {
      return spark.createDataFrame(List.<Row>of(), schema);
    }
    return spark.read().schema(schema).parquet(partition.toString());
  }
}
