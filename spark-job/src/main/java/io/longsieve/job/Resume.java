package io.longsieve.job;

import static org.apache.spark.sql.functions.col;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * {@code --resume}: a new run under the same output root that skips every doc_id an earlier run
 * already finished with status ok, so that across the runs each doc_id has exactly one ok row.
 *
 * <p>What counts as done is what is in {@code DIR/outputs}: rows that reached the table. A run killed
 * before its outputs were written left nothing there, so its documents run again; the rows of its
 * failed statuses (oom, timeout, engine_error, too_long, ...) are retried too. The skip is a left
 * anti join on doc_id against {@code outputs WHERE status = 'ok'}, which Spark (and RAPIDS) run as a
 * broadcast or shuffled hash join. Before a run starts, {@link #cleanStale} removes what a killed run
 * left half-written, so it cannot be committed by the next run's writes.
 */
final class Resume {
  private Resume() {}

  private static final Logger LOG = LogManager.getLogger(Resume.class);

  /** The documents still to run, and the earlier runs they were checked against. */
  record Todo(Dataset<Row> rows, List<String> earlierRuns) {}

  static Todo apply(SparkSession spark, FileSystem fs, RunOptions o, Dataset<Row> parsed) {
    if (!o.production().resume()) return new Todo(parsed, List.of());
    Path outputs = new Path(o.output(), "outputs");
    List<String> runs = runIds(fs, outputs);
    if (runs.isEmpty()) {
      LOG.info("--resume: no earlier run under {}; running every document", outputs);
      return new Todo(parsed, runs);
    }
    Dataset<Row> done = OwnTables.all(spark, o.output(), "outputs", JobSchemas.OUTPUTS)
        .filter(col("status").equalTo(JobSchemas.OK)).select("doc_id");
    LOG.info("--resume: skipping documents already ok in runs {}", runs);
    return new Todo(parsed.join(done, parsed.col("doc_id").equalTo(done.col("doc_id")), "left_anti"), runs);
  }

  /** run_id values present under a table root (its run_id=... folders), sorted. */
  static List<String> runIds(FileSystem fs, Path table) {
    List<String> runs = new ArrayList<>();
    try {
      if (!fs.exists(table)) return runs;
      for (FileStatus s : fs.listStatus(table)) {
        String n = s.getPath().getName();
        if (s.isDirectory() && n.startsWith("run_id=")) runs.add(n.substring("run_id=".length()));
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot list " + table + ": " + e.getMessage(), e);
    }
    runs.sort(null);
    return runs;
  }

  /**
   * Removes what a killed run leaves behind: the commit protocol's {@code _temporary} folders under
   * outputs/ and stats/ (a later job's commit would otherwise publish the dead job's committed task
   * files), {@code _staging} folders of other runs, and stats rows that never reached outputs
   * ({@link UnfinishedRuns}). Called only under the output's lock ({@link OutputLock}): no other run
   * is live on this output, so nothing deleted here belongs to a running job.
   */
  static void cleanStale(SparkSession spark, FileSystem fs, String output, String runId) {
    try {
      for (String table : new String[] {"outputs", "stats"}) {
        Path tmp = new Path(new Path(output, table), "_temporary");
        if (fs.exists(tmp)) {
          LOG.warn("removing {} left by an earlier run that did not finish", tmp);
          fs.delete(tmp, true);
        }
      }
      Path staging = new Path(output, "_staging");
      if (fs.exists(staging)) {
        for (FileStatus s : fs.listStatus(staging)) {
          if (!s.getPath().getName().equals(runId)) {
            LOG.warn("removing {} left by an earlier run that did not finish", s.getPath());
            fs.delete(s.getPath(), true);
          }
        }
      }
      UnfinishedRuns.repair(spark, fs, output, runId);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot clean " + output + ": " + e.getMessage(), e);
    }
  }
}
