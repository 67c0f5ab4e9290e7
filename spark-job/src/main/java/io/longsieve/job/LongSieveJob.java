package io.longsieve.job;

import static org.apache.spark.sql.functions.col;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;

/**
 * One run, driver side: read and check the input, generate on the executors, write outputs, stats
 * and the manifest.
 *
 * <p>The model runs once per document: the generation stage writes its combined rows to
 * {@code DIR/_staging/<run_id>} first, and both tables are projections of that copy (a cache could
 * be evicted or lost with an executor, and Spark would then silently generate again). The staging
 * copy is deleted at the end.
 *
 * <p>Documents are placed by estimated cost ({@link GenerationStage}) and written in commit slices:
 * each slice is generated, then appended to stats and outputs, so a killed run keeps its finished
 * slices and {@code --resume} ({@link Resume}) runs only the rest. Within a run a doc_id is written
 * once: each partition's rows come from the one task attempt Spark's commit protocol lets commit,
 * and a retried or speculative attempt of a partition computes exactly the same documents.
 */
public final class LongSieveJob {
  private LongSieveJob() {}

  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(LongSieveJob.class);

  /**
   * Runs the job in {@code spark}.
   *
   * @throws IllegalArgumentException when the input does not exist or the run id was already used
   *     under this output root (appending would mix two runs in one partition)
   */
  public static RunSummary run(SparkSession spark, RunOptions o) {
    Instant start = Instant.now();
    FileSystem fs = fileSystem(spark, o.output());
    refuseUsedRunId(fs, o);
    Resume.cleanStale(fs, o.output(), o.runId());
    InputReader.Format format = InputReader.format(spark, o.input());
    LOG.info("run {}: reading {} ({})", o.runId(), o.input(), format);
    Dataset<Row> parsed = InputReader.read(spark, o.input());
    Resume.Todo todo = Resume.apply(spark, fs, o, parsed);

    spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": plan partitions by cost");
    JobMetrics metrics = JobMetrics.register(spark.sparkContext());
    GenerationStage.Stage stage = GenerationStage.build(spark, todo.rows(), o, metrics);
    spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": generate");
    Path staging = new Path(new Path(o.output(), "_staging"), o.runId());
    List<String> sliceDirs = new ArrayList<>();
    try (ProgressListener progress = ProgressListener.attach(spark.sparkContext(), metrics, stage.rows(),
        stage.plan().totalCost(), o.production().progressIntervalSeconds())) {
      LOG.info("run {}: generating {} documents on {} partitions in {} commit slices", o.runId(),
          stage.rows(), stage.plan().numPartitions(), stage.slices());
      for (int s = 0; s < stage.slices(); s++) {
        spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": generate slice " + (s + 1) + "/" + stage.slices());
        Path dir = new Path(staging, "slice=" + s);
        stage.slice(s).write().mode(SaveMode.Overwrite).parquet(dir.toString());
        sliceDirs.add(dir.toString());
        // stats first: a document in outputs always has its stats row, even if the driver dies here
        spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": commit slice " + (s + 1) + "/" + stage.slices());
        Dataset<Row> slice = spark.read().schema(JobSchemas.RESULT).parquet(dir.toString());
        slice.select(columns(JobSchemas.STATS_COLUMNS)).write().mode(SaveMode.Append).partitionBy("run_id")
            .parquet(new Path(o.output(), "stats").toString());
        slice.select(columns(JobSchemas.OUTPUT_COLUMNS)).write().mode(SaveMode.Append).partitionBy("run_id")
            .parquet(new Path(o.output(), "outputs").toString());
      }
    }

    spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": summary");
    Dataset<Row> done = spark.read().schema(JobSchemas.RESULT).parquet(sliceDirs.toArray(new String[0]));
    RunSummary summary = RunSummary.of(o.runId(), done, start, Instant.now());
    spark.sparkContext().setJobDescription(null);
    delete(fs, staging);
    Map<String, Object> extra = new LinkedHashMap<>();
    extra.put("resumed_from", todo.earlierRuns());
    extra.put("partitions", stage.plan().numPartitions());
    extra.put("slices", stage.slices());
    extra.put("estimated_cost", stage.plan().totalCost());
    RunManifest.write(spark, o, format, summary, extra);
    writeReport(spark, o);
    return summary;
  }

  /** The HTML run report; a report that cannot be written costs a warning, never the run's outputs. */
  private static void writeReport(SparkSession spark, RunOptions o) {
    spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": report");
    try {
      LOG.info("run {}: report at {}", o.runId(), io.longsieve.report.RunReport.write(spark, o.output(), o.runId()));
    } catch (IOException | RuntimeException e) {
      LOG.warn("run {}: the HTML report could not be written: {}", o.runId(), e.toString());
    } finally {
      spark.sparkContext().setJobDescription(null);
    }
  }

  private static Column[] columns(java.util.List<String> names) {
    return names.stream().map(n -> col(n)).toArray(Column[]::new);
  }

  private static void refuseUsedRunId(FileSystem fs, RunOptions o) {
    try {
      Path manifest = RunManifest.path(o.output(), o.runId());
      Path outputs = new Path(new Path(o.output(), "outputs"), "run_id=" + o.runId());
      if (fs.exists(manifest) || fs.exists(outputs)) {
        throw new IllegalArgumentException("run id '" + o.runId() + "' was already used under " + o.output()
            + " (" + (fs.exists(manifest) ? manifest : outputs) + " exists); choose another --run-id");
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read output root " + o.output() + ": " + e.getMessage(), e);
    }
  }

  private static FileSystem fileSystem(SparkSession spark, String path) {
    try {
      return new Path(path).getFileSystem(spark.sparkContext().hadoopConfiguration());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot open the file system of " + path + ": " + e.getMessage(), e);
    }
  }

  private static void delete(FileSystem fs, Path p) {
    try {
      fs.delete(p, true);
      Path parent = p.getParent();
      if (fs.exists(parent) && fs.listStatus(parent).length == 0) fs.delete(parent, false);
    } catch (IOException e) {
      // leftover staging files cost space, not correctness: the next run overwrites its own
    }
  }
}
