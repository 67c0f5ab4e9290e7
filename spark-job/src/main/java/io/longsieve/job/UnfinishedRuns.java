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
 * Stats and outputs exactly once across a kill and {@code --resume}. A run commits each slice to
 * stats first, then to outputs; a run killed between the two leaves stats rows for documents that
 * are not in outputs, and {@code --resume} runs those documents again (it goes by outputs), so they
 * would have two stats rows. An output folder removed under a running run can leave the opposite:
 * outputs rows whose stats went with the folder. The next run on the output (under its lock, so the
 * dead run is known to be dead) keeps only the dead run's rows of documents in both tables, and
 * writes {@code runs/<run_id>.unfinished} saying what the run holds, which the report shows.
 *
 * <p>A rewrite goes through {@code <out>/_repair/<run_id>} (outputs: {@code _repair_outputs}) and two
 * renames; a run killed between them is finished by the next one ({@link #finishInterrupted}).
 */
final class UnfinishedRuns {
  private UnfinishedRuns() {}

  private static final Logger LOG = LogManager.getLogger(UnfinishedRuns.class);

  /** What an unfinished run holds, found by the first run after it. */
  static Path recordPath(String output, String runId) {
    return new Path(new Path(output, "runs"), runId + ".unfinished");
  }

  static void repair(SparkSession spark, FileSystem fs, String output, String currentRun) throws IOException {
    Path stats = new Path(output, "stats"), outputs = new Path(output, "outputs");
    finishInterrupted(fs, output, "stats");
    finishInterrupted(fs, output, "outputs");
    java.util.SortedSet<String> ids = new java.util.TreeSet<>(Resume.runIds(fs, stats));
    ids.addAll(Resume.runIds(fs, outputs));
    for (String id : ids) {
      if (id.equals(currentRun) || fs.exists(RunManifest.path(output, id)) || fs.exists(recordPath(output, id))) continue;
      // committed: a document with rows in both tables. Stats rows without outputs are a kill between the two
      // writes of a slice; outputs rows without stats, a stats partition lost under the run (its output folder
      // removed and made again by the next write). Either half alone goes, so --resume runs the document again.
      Dataset<Row> st = OwnTables.run(spark, output, "stats", id, JobSchemas.STATS);
      Dataset<Row> out = OwnTables.run(spark, output, "outputs", id, JobSchemas.OUTPUTS);
      // materialised before either table is rewritten: a lazy plan would read files the first rewrite replaced
      Dataset<Row> inStats = st.select("doc_id").distinct().localCheckpoint();
      Dataset<Row> inOutputs = out.select("doc_id").distinct().localCheckpoint();
      long statsRemoved = keepOnly(fs, output, id, "stats", st, inOutputs);
      long outputsRemoved = keepOnly(fs, output, id, "outputs", out, inStats);
      long kept = inStats.join(inOutputs, "doc_id").count();
      LOG.warn("run {} did not finish: it committed {} documents; {} stats rows and {} outputs rows of documents that "
          + "never reached the other table were removed (--resume runs those documents again)", id, kept, statsRemoved,
          outputsRemoved);
      writeRecord(fs, output, id, kept, statsRemoved, outputsRemoved);
    }
  }

  /** Keeps the rows of run {@code id}'s partition of {@code table} whose doc_id is in {@code docs}; the rows removed. */
  private static long keepOnly(FileSystem fs, String output, String id, String table, Dataset<Row> rows,
                               Dataset<Row> docs) throws IOException {
    Path partition = new Path(new Path(output, table), "run_id=" + id);
    if (!fs.exists(partition)) return 0;
    long before = rows.count();
    Dataset<Row> keep = rows.join(docs, rows.col("doc_id").equalTo(docs.col("doc_id")), "left_semi");
    long kept = keep.count();
    if (kept == 0) fs.delete(partition, true);
    else if (kept < before) replace(fs, output, id, table, partition, keep);
    return before - kept;
  }

  /** The repair folder of a table: {@code _repair} for stats (as before outputs were repaired too), else {@code _repair_TABLE}. */
  private static Path repairFolder(String output, String table) {
    return new Path(output, table.equals("stats") ? "_repair" : "_repair_" + table);
  }

  private static void replace(FileSystem fs, String output, String id, String table, Path partition, Dataset<Row> keep)
      throws IOException {
    Path fresh = new Path(repairFolder(output, table), id);
    Path old = new Path(repairFolder(output, table), id + ".old");
    keep.write().mode(SaveMode.Overwrite).parquet(fresh.toString());
    if (!fs.rename(partition, old) || !fs.rename(fresh, partition)) {
      throw new IOException("cannot swap " + fresh + " into " + partition);
    }
    fs.delete(fresh.getParent(), true); // the old copy
  }

  /** A swap cut short: put the rewritten copy in place if the partition is gone, else drop it. */
  private static void finishInterrupted(FileSystem fs, String output, String table) throws IOException {
    Path repair = repairFolder(output, table);
    if (!fs.exists(repair)) return;
    for (FileStatus s : fs.listStatus(repair)) {
      String name = s.getPath().getName();
      if (name.endsWith(".old")) continue;
      Path target = new Path(new Path(output, table), "run_id=" + name);
      if (!fs.exists(target) && fs.exists(new Path(s.getPath(), "_SUCCESS"))) {
        LOG.warn("finishing the {} repair of run {} that a killed run started", table, name);
        fs.rename(s.getPath(), target);
      } else {
        fs.delete(s.getPath(), true);
      }
    }
    fs.delete(repair, true); // the .old copies: their partitions are in place
  }

  private static void writeRecord(FileSystem fs, String output, String id, long kept, long statsRemoved,
                                  long outputsRemoved) throws IOException {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("run_id", id);
    m.put("state", "unfinished");
    m.put("committed_documents", kept);
    m.put("stats_rows_removed", statsRemoved);
    m.put("outputs_rows_removed", outputsRemoved);
    m.put("found", Instant.now().toString());
    AtomicFiles.write(recordPath(output, id), new ObjectMapper().writeValueAsBytes(m), fs.getConf());
  }
}
