package io.longsieve.job;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;

/**
 * Stats exactly once across a kill and {@code --resume}, like outputs. A run commits each slice to
 * stats first, then to outputs; a run killed between the two leaves stats rows for documents that
 * are not in outputs, and {@code --resume} runs those documents again (it goes by outputs), so they
 * would have two stats rows. The next run on the output (under its lock, so the dead run is known
 * to be dead) keeps only the dead run's stats rows whose doc_id reached its outputs, and writes
 * {@code runs/<run_id>.unfinished} saying what the run holds, which the report shows.
 *
 * <p>The rewrite goes through {@code <out>/_repair/<run_id>} and two renames; a run killed between
 * them is finished by the next one ({@link #finishInterrupted}).
 */
final class UnfinishedRuns {
  private UnfinishedRuns() {}

  private static final Logger LOG = LogManager.getLogger(UnfinishedRuns.class);

  /** What an unfinished run holds, found by the first run after it. */
  static Path recordPath(String output, String runId) {
    return new Path(new Path(output, "runs"), runId + ".unfinished");
  }

  static void repair(SparkSession spark, FileSystem fs, String output, String currentRun) throws IOException {
    Path stats = new Path(output, "stats");
    finishInterrupted(fs, output, stats);
    for (String id : Resume.runIds(fs, stats)) {
      if (id.equals(currentRun) || fs.exists(RunManifest.path(output, id)) || fs.exists(recordPath(output, id))) continue;
      Path runStats = new Path(stats, "run_id=" + id);
      Path runOutputs = new Path(new Path(output, "outputs"), "run_id=" + id);
      Dataset<Row> all = OwnTables.run(spark, output, "stats", id, JobSchemas.STATS);
      long before = all.count();
      long kept = 0;
      if (fs.exists(runOutputs)) {
        Dataset<Row> done = OwnTables.run(spark, output, "outputs", id, JobSchemas.OUTPUTS).select("doc_id").distinct();
        Dataset<Row> keep = all.join(done, all.col("doc_id").equalTo(done.col("doc_id")), "left_semi");
        kept = keep.count();
        if (kept < before && kept > 0) replace(fs, output, id, runStats, keep);
      }
      if (kept == 0) fs.delete(runStats, true);
      LOG.warn("run {} did not finish: it committed {} documents; {} stats rows of documents that never reached "
          + "its outputs were removed (--resume runs those documents again)", id, kept, before - kept);
      writeRecord(fs, output, id, kept, before - kept);
    }
  }

  private static void replace(FileSystem fs, String output, String id, Path runStats, Dataset<Row> keep)
      throws IOException {
    Path fresh = new Path(new Path(output, "_repair"), id);
    Path old = new Path(new Path(output, "_repair"), id + ".old");
    keep.write().mode(SaveMode.Overwrite).parquet(fresh.toString());
    if (!fs.rename(runStats, old) || !fs.rename(fresh, runStats)) {
      throw new IOException("cannot swap " + fresh + " into " + runStats);
    }
    fs.delete(fresh.getParent(), true); // the old copy
  }

  /** A swap cut short: put the rewritten copy in place if the partition is gone, else drop it. */
  private static void finishInterrupted(FileSystem fs, String output, Path stats) throws IOException {
    Path repair = new Path(output, "_repair");
    if (!fs.exists(repair)) return;
    for (FileStatus s : fs.listStatus(repair)) {
      String name = s.getPath().getName();
      if (name.endsWith(".old")) continue;
      Path target = new Path(stats, "run_id=" + name);
      if (!fs.exists(target) && fs.exists(new Path(s.getPath(), "_SUCCESS"))) {
        LOG.warn("finishing the stats repair of run {} that a killed run started", name);
        fs.rename(s.getPath(), target);
      } else {
        fs.delete(s.getPath(), true);
      }
    }
    fs.delete(repair, true); // the .old copies: their partitions are in place
  }

  private static void writeRecord(FileSystem fs, String output, String id, long kept, long removed) throws IOException {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("run_id", id);
    m.put("state", "unfinished");
    m.put("committed_documents", kept);
    m.put("stats_rows_removed", removed);
    m.put("found", Instant.now().toString());
    AtomicFiles.write(recordPath(output, id), new ObjectMapper().writeValueAsBytes(m), fs.getConf());
  }
}
