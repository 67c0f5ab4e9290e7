package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;

/**
 * An input that changes during a run never ends in exit 0 with fewer rows than planned: the task
 * that reads a changed or deleted file fails the run naming it, the driver checks every file and the
 * committed row counts at the end, and {@code --resume} completes the run once the input is stable.
 */
class InputChangeTest extends SparkSessionTest {

  private Path input(int rows) {
    String[] lines = new String[rows];
    for (int i = 0; i < rows; i++) lines[i] = JobTestSupport.json("d" + i, "summary", "Report " + i + " on the harbour.", null);
    return JobTestSupport.jsonl(dir, "docs.jsonl", lines);
  }

  private static void keepFirstLines(Path file, int n) throws Exception {
    List<String> lines = Files.readAllLines(file);
    Files.write(file, lines.subList(0, n));
  }

  @Test
  void aFileCutOnceThePlanIsMadeStopsTheRunThenResumeCompletesIt() throws Exception {
    Path in = input(120);
    Path out = dir.resolve("out");
    // cut the file to 12 lines as soon as the job that collects the plan's costs ends, as an operator did
    SparkListener cutter = new SparkListener() {
      private int planJob = -1;

      @Override
      public synchronized void onJobStart(SparkListenerJobStart start) {
        String d = start.properties() == null ? null : start.properties().getProperty("spark.job.description");
        if (planJob < 0 && d != null && d.endsWith("plan partitions by cost")) planJob = start.jobId();
      }

      @Override
      public synchronized void onJobEnd(SparkListenerJobEnd end) {
        if (end.jobId() != planJob) return;
        try {
          keepFirstLines(in, 12);
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }
    };
    spark.sparkContext().addSparkListener(cutter);
    JobTestSupport.Cli first;
    try {
      first = JobTestSupport.run("--input", in.toString(), "--output", out.toString(), "--run-id", "cut");
    } finally {
      spark.sparkContext().removeSparkListener(cutter);
    }
    assertEquals(3, first.code(), first.err());
    String line = first.lastErrLine();
    assertTrue(line.startsWith("longsieve run stopped: input file ") && line.contains("docs.jsonl changed during the run"),
        line);
    assertTrue(line.contains("--resume"), "says the way on: " + line);
    assertFalse(Files.exists(out.resolve("runs").resolve("cut.json")), "no manifest: the run did not finish");

    JobTestSupport.Cli resumed = JobTestSupport.run("--input", in.toString(), "--output", out.toString(), "--run-id",
        "again", "--resume");
    assertEquals(0, resumed.code(), resumed.err());
    assertEveryDocumentOnceOk(out, 12);
  }

  @Test
  void aFileChangedAfterTheListingFailsTheTaskThatReadsItNamingTheFile() throws Exception {
    Path in = input(6);
    RunOptions o = JobTestSupport.options(in, dir.resolve("out"), "changed", Map.of());
    try (LongSieveJob.Checked checked = LongSieveJob.check(o, spark.sparkContext().hadoopConfiguration())) {
      keepFirstLines(in, 3);
      RunFault f = assertThrows(RunFault.class, () -> LongSieveJob.run(spark, o, checked));
      assertEquals(RunFault.Kind.INPUT_CHANGED, f.kind());
      assertTrue(f.getMessage().matches("input file file:.*docs\\.jsonl changed during the run \\(planned: \\d+ bytes, "
          + "modified .*; now: \\d+ bytes, modified .*\\)"), f.getMessage());
    }
  }

  @Test
  void aFileDeletedAfterTheListingIsNamedNotSparksTrace() throws Exception {
    Path in = input(4);
    RunOptions o = JobTestSupport.options(in, dir.resolve("out"), "deleted", Map.of());
    try (LongSieveJob.Checked checked = LongSieveJob.check(o, spark.sparkContext().hadoopConfiguration())) {
      Files.delete(in);
      RunFault f = assertThrows(RunFault.class, () -> LongSieveJob.run(spark, o, checked));
      assertEquals(RunFault.Kind.INPUT_CHANGED, f.kind());
      assertTrue(f.getMessage().startsWith("input file file:" + in + " was deleted during the run (planned: "), f.getMessage());
      assertFalse(f.line().contains("\n"), "one line: " + f.line());
    }
  }

  @Test
  void theEndOfRunCheckCountsEveryPlannedRowInOutputsAndStats() {
    Path in = input(3);
    RunOptions o = JobTestSupport.options(in, dir.resolve("out"), "counted", Map.of());
    LongSieveJob.run(spark, o);
    InputSnapshot snapshot = InputFiles.list(spark.sparkContext().hadoopConfiguration(), in.toString()).snapshot();
    CommitCheck.require(spark, o, snapshot, spark.sparkContext().hadoopConfiguration(), 3, 3); // as written
    RunFault f = assertThrows(RunFault.class,
        () -> CommitCheck.require(spark, o, snapshot, spark.sparkContext().hadoopConfiguration(), 30, 30));
    assertEquals(RunFault.Kind.INCOMPLETE, f.kind());
    assertEquals("run counted planned 30 input rows (30 documents) but its outputs hold 3 rows (3 documents)", f.getMessage());
  }

  /** Every doc_id of the input as it is now has exactly one ok row across the runs under {@code out}. */
  private void assertEveryDocumentOnceOk(Path out, int documents) {
    Map<String, List<String>> okRuns = new HashMap<>();
    for (Row r : spark.read().parquet(out.resolve("outputs").toString()).where(col("status").equalTo("ok"))
        .select("doc_id", "run_id").collectAsList()) {
      okRuns.computeIfAbsent(r.getString(0), k -> new ArrayList<>()).add(r.getString(1));
    }
    for (int i = 0; i < documents; i++) {
      assertEquals(1, okRuns.getOrDefault("d" + i, List.of()).size(), "d" + i + " ok in runs " + okRuns.get("d" + i));
    }
  }
}
