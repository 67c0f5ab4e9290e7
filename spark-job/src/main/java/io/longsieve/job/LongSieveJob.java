package io.longsieve.job;

import static org.apache.spark.sql.functions.col;

import io.longsieve.cuda.CudaAvailability;
import io.longsieve.cuda.driver.KernelModule;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
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
   * What is checked and taken before Spark starts ({@link #check}): the input's files and the
   * output's lock, held until the run ends.
   */
  record Checked(InputFiles.Listing input, OutputLock lock) implements AutoCloseable {
    @Override
    public void close() {
      lock.close();
    }
  }

  /**
   * Every check that needs no Spark, in the order a user would fix them: the device, the model and the
   * policy against it, the input's files, a --resume against the runs it continues ({@link ResumeCheck}),
   * then the output (writable, not in use by another run, run id unused), whose lock is taken last so a
   * refused run leaves nothing behind.
   *
   * @throws IllegalArgumentException one line for the user
   */
  static Checked check(RunOptions o, Configuration conf) {
    checkDevice(o.device(), KernelModule.isBuilt());
    checkTsaChunk(o.device(), o.policy(), o.prefillChunk());
    if (o.master().startsWith("local")) checkLocalDevice(o.device(), CudaAvailability::unavailableReason);
    ModelCheck.check(o);
    InputFiles.Listing input = InputFiles.list(conf, o.input(), o.output());
    PromptTemplate template = o.generation().promptTemplate();
    if (template != null && input.columns() != null) { // Parquet: the columns are known before reading a row
      try {
        LongSieve.checkColumns(template, input.columns());
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("--prompt-template: " + e.getMessage().replace("of the DataFrame", "of input " + o.input()));
      }
    }
    ResumeCheck.require(o, conf);
    return new Checked(input, OutputLock.acquire(o, conf));
  }

  /**
   * {@code --device cuda} on a build without kernels (no nvcc where it was built) can never run, on any
   * executor: said here in one line rather than by every task's failure. The driver runs the same jar,
   * so it knows; whether the executors have a GPU it cannot know.
   */
  static void checkDevice(String device, boolean kernelsBuilt) {
    if (device.equals("cuda") && !kernelsBuilt) {
      throw new IllegalArgumentException("--device cuda: " + CudaAvailability.NO_KERNELS);
    }
  }

  /**
   * {@code --device cuda} with a TSA chunk the CUDA engine's activations cannot hold (they are sized
   * at start for max(prefillChunk, CudaRunner.MIN_GPU_CHUNK) rows; tsa:chunk=0 needs the whole
   * prompt) would fail every document: refused here in one line. On auto the executors may run on the
   * CPU, whose bound is its heap: the engine says so per document.
   */
  static void checkTsaChunk(String device, io.longsieve.policy.PolicySpec policy, int prefillChunk) {
    int tsa = policy.prefillChunk(), gpuRows = Math.max(prefillChunk, io.longsieve.cuda.CudaRunner.MIN_GPU_CHUNK);
    if (device.equals("cuda") && (tsa > gpuRows || tsa == 0)) {
      throw new IllegalArgumentException("--device cuda: " + (tsa == 0 ? "tsa:chunk=0 (the whole prompt in one chunk)"
          : "tsa:chunk=" + tsa) + " needs spark.longsieve.prefillChunk of at least " + (tsa == 0 ? "the longest prompt" : tsa)
          + " (the CUDA engine holds " + gpuRows + " rows of activations); or use the default tsa:chunk=4096");
    }
  }

  /**
   * {@code --device cuda} in local mode, where the engine runs in this JVM: a machine without a usable
   * NVIDIA driver or device is refused here in one line (its reason from {@code why}), not by every
   * task after Spark started.
   */
  static void checkLocalDevice(String device, java.util.function.Supplier<String> why) {
    if (!device.equals("cuda")) return;
    String reason = why.get();
    if (reason != null) {
      throw new IllegalArgumentException("--device cuda: " + reason + " on this machine, where local mode runs the engine; "
          + "run with --device cpu or auto");
    }
  }

  /**
   * Runs the job in {@code spark}: {@link #check}, then the run.
   *
   * @throws IllegalArgumentException when a check fails (the input, the model, the output in use by
   *     another run, the run id already used under this output root)
   */
  public static RunSummary run(SparkSession spark, RunOptions o) {
    try (Checked checked = check(o, spark.sparkContext().hadoopConfiguration())) {
      return run(spark, o, checked);
    }
  }

  /**
   * The run, after {@link #check}; the caller holds {@code checked}'s lock for the whole call.
   *
   * @throws IllegalArgumentException also when no executor offers what the tasks ask for within
   *     spark.longsieve.resourceWaitSeconds ({@link ResourceWatchdog})
   */
  static RunSummary run(SparkSession spark, RunOptions o, Checked checked) {
    try (ResourceWatchdog watchdog = ResourceWatchdog.start(spark.sparkContext(), o.ops().resourceWaitSeconds())) {
      return watchdog.guard(() -> runWatched(spark, o, checked));
    } catch (IllegalArgumentException | RunFault e) {
      throw e;
    } catch (Exception e) { // Spark's SparkException is checked, thrown from Scala undeclared
      RunFault f = RunFault.explain(e, checked.input().snapshot(), o, spark.sparkContext().hadoopConfiguration());
      if (f != null) throw f;
      throw sneaky(e);
    }
  }

  @SuppressWarnings("unchecked")
  private static <E extends Exception> RuntimeException sneaky(Exception e) throws E {
    throw (E) e; // rethrown as it came: Spark's checked exceptions are undeclared in Scala too
  }

  private static RunSummary runWatched(SparkSession spark, RunOptions o, Checked checked) {
    Instant start = Instant.now();
    FileSystem fs = fileSystem(spark, o.output());
    Resume.cleanStale(spark, fs, o.output(), o.runId()); // safe: the lock says no other run is live here
    InputFiles.Listing files = checked.input();
    InputReader.Format format = files.format();
    LOG.info("run {}: reading {} ({}, {} files)", o.runId(), o.input(), format, files.data().size());
    Dataset<Row> parsed = InputReader.read(spark, files, o.generation().promptTemplate());
    Resume.Todo todo = Resume.apply(spark, fs, o, parsed);
    RunBudget.Applied budget = RunBudget.apply(todo.rows(), o);

    spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": plan partitions by cost");
    JobMetrics metrics = JobMetrics.register(spark.sparkContext());
    GenerationStage.Stage stage = LongSieve.stage(spark, budget.rows(), o, metrics); // the DataFrame API's stage
    spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": generate");
    Path staging = new Path(new Path(o.output(), "_staging"), o.runId());
    List<String> sliceDirs = new ArrayList<>();
    try (ProgressListener progress = ProgressListener.attach(spark.sparkContext(), metrics, stage.rows(),
        stage.plan().totalCost(), o.production().progressIntervalSeconds())) {
      LOG.info("run {}: generating {} documents on {} partitions in {} commit slices", o.runId(),
          stage.rows(), stage.plan().numPartitions(), stage.slices());
      for (int s = 0; s < stage.slices(); s++) {
        requireOutput(o, spark.sparkContext().hadoopConfiguration());
        spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": generate slice " + (s + 1) + "/" + stage.slices());
        Path dir = new Path(staging, "slice=" + s);
        stage.slice(s).write().mode(SaveMode.Overwrite).parquet(dir.toString());
        sliceDirs.add(dir.toString());
        // stats first: a document in outputs always has its stats row, even if the driver dies here
        spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": commit slice " + (s + 1) + "/" + stage.slices());
        Dataset<Row> slice = spark.read().schema(JobSchemas.RESULT).parquet(dir.toString());
        slice.select(columns(JobSchemas.STATS_COLUMNS)).write().mode(SaveMode.Append).partitionBy("run_id")
            .parquet(new Path(o.output(), "stats").toString());
        Dataset<Row> outputs = slice.select(columns(JobSchemas.OUTPUT_COLUMNS));
        if (o.generation().typedOutput()) outputs = AnswerColumn.add(outputs, o.generation().jsonSchema());
        outputs.write().mode(SaveMode.Append).partitionBy("run_id").parquet(new Path(o.output(), "outputs").toString());
        RunInterruption.committed((s + 1) + " of " + stage.slices() + " commit slices are committed and kept");
      }
    }

    spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": check the committed rows");
    CommitCheck.require(spark, o, files.snapshot(), spark.sparkContext().hadoopConfiguration(), stage.rows(),
        stage.plan().documents());
    spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": summary");
    Dataset<Row> done = spark.read().schema(JobSchemas.RESULT).parquet(sliceDirs.toArray(new String[0]));
    RunSummary summary = RunSummary.of(o.runId(), done, start, Instant.now());
    ShadowAudit.Agreement audit = audit(spark, o, budget.rows(), done);
    LongSieveMetrics.recordRun(summary, audit);
    spark.sparkContext().setJobDescription(null);
    delete(fs, staging);
    Map<String, Object> extra = new LinkedHashMap<>();
    extra.put("resumed_from", todo.earlierRuns());
    extra.put("partitions", stage.plan().numPartitions());
    extra.put("slices", stage.slices());
    extra.put("estimated_cost", stage.plan().totalCost());
    extra.put("skipped_input_files", files.skipped());
    Map<String, Object> budgetEntry = RunBudget.manifest(o, budget, summary);
    if (budgetEntry != null) extra.put("budget", budgetEntry);
    if (audit != null) extra.put("audit", audit.manifest(o.ops(), o.policy().canonical()));
    RunManifest.write(spark, o, format, summary, extra);
    if (o.ops().report()) writeReport(spark, o);
    return summary;
  }

  /** Stops the run when its output folder was removed or changed under it: writing on would recreate it half. */
  static void requireOutput(RunOptions o, Configuration conf) {
    String gone = RunFault.outputGone(o, conf);
    if (gone != null) throw new RunFault(RunFault.Kind.OUTPUT_GONE, gone, null);
  }

  /** The shadow audit ({@link ShadowAudit}); one that fails costs a warning, never the run's committed outputs. */
  private static ShadowAudit.Agreement audit(SparkSession spark, RunOptions o, Dataset<Row> todo, Dataset<Row> done) {
    try {
      return ShadowAudit.run(spark, o, todo, done);
    } catch (Exception e) { // Spark's AnalysisException and SparkException are checked, thrown from Scala undeclared
      LOG.warn("run {}: the shadow audit failed: {}", o.runId(), e.toString());
      return null;
    }
  }

  /** The HTML run report; a report that cannot be written costs a warning, never the run's outputs. */
  private static void writeReport(SparkSession spark, RunOptions o) {
    spark.sparkContext().setJobDescription("longsieve " + o.runId() + ": report");
    try {
      LOG.info("run {}: report at {}", o.runId(), io.longsieve.report.RunReport.write(spark, o.output(), o.runId()));
    } catch (Exception e) { // IOException, and Spark's AnalysisException (checked, thrown from Scala undeclared)
      LOG.warn("run {}: the HTML report could not be written ({}); `longsieve report --output {} --run-id {}` writes it "
          + "again", o.runId(), e.toString().lines().findFirst().orElse(""), o.output(), o.runId());
    } finally {
      spark.sparkContext().setJobDescription(null);
    }
  }

  private static Column[] columns(java.util.List<String> names) {
    return names.stream().map(n -> col(n)).toArray(Column[]::new);
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
