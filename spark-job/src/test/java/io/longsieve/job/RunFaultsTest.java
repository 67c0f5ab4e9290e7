package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Each fault a run can meet ends in one line on stderr with its own exit code (docs/failures.md),
 * keeps what was committed, and {@code --resume} then completes the run with every document once:
 * a disk that fills mid-run and again while the manifest is written, Spark giving up on a task after
 * its retries, the output folder removed mid-run. (The input changing: {@link InputChangeTest};
 * SIGTERM: {@link ResumeAfterKilledDriverTest}.)
 */
class RunFaultsTest extends SparkSessionTest {

  @AfterEach
  void freeTheDisk() {
    FullDiskFileSystem.full = p -> false;
  }

  private Path input(int rows) {
    String[] lines = new String[rows];
    for (int i = 0; i < rows; i++) lines[i] = JobTestSupport.json("d" + i, "summary", "Report " + i + " on the harbour.", null);
    return JobTestSupport.jsonl(dir, "docs.jsonl", lines);
  }

  /** Two commit slices, so a fault can come between them. */
  private static JobTestSupport.Cli run(Path in, String out, String runId, String... more) {
    List<String> args = new ArrayList<>(List.of("--input", in.toString(), "--output", out, "--run-id", runId,
        "--conf", "spark.longsieve.partitions=2", "--conf", "spark.longsieve.slices=2",
        "--conf", "spark.hadoop." + FullDiskFileSystem.IMPL_KEY + "=" + FullDiskFileSystem.class.getName()));
    args.addAll(List.of(more));
    return JobTestSupport.run(args.toArray(String[]::new));
  }

  private static void assertStopped(JobTestSupport.Cli r, int code, String what) {
    assertEquals(code, r.code(), r.err());
    String line = r.lastErrLine();
    assertTrue(line.startsWith("longsieve run stopped: ") && line.contains(what), line);
    assertEquals(1, r.err().strip().lines().count(), "one line: " + r.err());
  }

  @Test
  void aDiskThatFillsMidRunAndAgainAtTheManifestThenResumeCompletesTheRun() throws Exception {
    spark.sparkContext().hadoopConfiguration().set(FullDiskFileSystem.IMPL_KEY, FullDiskFileSystem.class.getName());
    Path in = input(6);
    String out = "fulltest://" + dir.resolve("out");

    FullDiskFileSystem.full = p -> p.toString().contains("/slice=1/"); // the second slice's first file
    JobTestSupport.Cli first = run(in, out, "first");
    assertStopped(first, 4, "out of disk space (No space left on device); what was committed is kept: free space");
    assertTrue(first.lastErrLine().contains("--resume"));

    FullDiskFileSystem.full = p -> p.getName().startsWith(".second.json."); // the manifest's temporary file
    JobTestSupport.Cli second = run(in, out, "second", "--resume");
    assertStopped(second, 4, "out of disk space");
    Path runs = dir.resolve("out").resolve("runs");
    assertFalse(Files.exists(runs.resolve("second.json")), "no manifest, and no torn one either");
    try (var files = Files.list(runs)) {
      assertTrue(files.noneMatch(f -> f.getFileName().toString().endsWith(".tmp")), "the temporary file is removed");
    }

    FullDiskFileSystem.full = p -> false;
    JobTestSupport.Cli report = JobTestSupport.cli("report", "--output", out, "--run-id", "second");
    assertEquals(0, report.code(), report.err());
    assertEquals("longsieve report: no manifest runs/second.json (the run did not finish, or is still running); the report "
        + "is made from the tables (outputs, stats) alone", report.err().strip());

    JobTestSupport.Cli third = run(in, out, "third", "--resume");
    assertEquals(0, third.code(), third.err());
    assertEveryDocumentOnce(dir.resolve("out"), 6);
  }

  @Test
  void aTornManifestIsSaidInOneLineAndTheReportComesFromTheTables() throws Exception {
    Path in = input(2);
    Path out = dir.resolve("out");
    assertEquals(0, JobTestSupport.run("--input", in.toString(), "--output", out.toString(), "--run-id", "torn").code());
    Files.writeString(out.resolve("runs").resolve("torn.json"), "{\"run_id\": \"torn\", \"input\": "); // as a full disk left it
    JobTestSupport.Cli report = JobTestSupport.cli("report", "--output", out.toString());
    assertEquals(0, report.code(), report.err());
    assertEquals("longsieve report: runs/torn.json is torn (28 bytes, not a whole JSON object); the report is made from "
        + "the tables (outputs, stats) alone", report.err().strip());
    assertTrue(Files.readString(out.resolve("report").resolve("torn.html")).contains("id=\"torn-manifest\""));
  }

  @Test
  void sparkGivingUpOnATaskIsOneLineThenResumeCompletesTheRun() throws Exception {
    Path in = input(4);
    Path out = dir.resolve("out");
    // in local mode the injected sticky CUDA error fails the task (an executor would exit), and local mode retries nothing
    JobTestSupport.Cli first = run(in, out.toString(), "first", "--conf",
        "spark.longsieve.test.injectStickyCudaError=d1@" + dir.resolve("sticky.marker"));
    assertStopped(first, 6, "Spark gave up after the task's retries: Task ");
    assertTrue(first.lastErrLine().contains("sticky CUDA error on doc_id d1"), "quotes Spark's reason: " + first.lastErrLine());

    JobTestSupport.Cli resumed = run(in, out.toString(), "second", "--resume");
    assertEquals(0, resumed.code(), resumed.err());
    assertEveryDocumentOnce(out, 4);
  }

  @Test
  void anOutputFolderRemovedMidRunStopsItThenARunAgainCompletes() throws Exception {
    Path in = input(6);
    Path out = dir.resolve("out");
    SparkListener remover = new SparkListener() {
      private final List<Integer> commits = new ArrayList<>();

      @Override
      public synchronized void onJobStart(SparkListenerJobStart start) {
        String d = start.properties() == null ? null : start.properties().getProperty("spark.job.description");
        if (d != null && d.endsWith("commit slice 1/2")) commits.add(start.jobId());
      }

      @Override
      public synchronized void onJobEnd(SparkListenerJobEnd end) {
        if (commits.size() == 2 && end.jobId() == commits.get(1)) { // slice 1 is in stats and outputs
          org.apache.commons.io.FileUtils.deleteQuietly(out.toFile());
        }
      }
    };
    spark.sparkContext().addSparkListener(remover);
    JobTestSupport.Cli first;
    try {
      first = run(in, out.toString(), "first");
    } finally {
      spark.sparkContext().removeSparkListener(remover);
    }
    assertEquals(5, first.code(), first.err());
    assertTrue(first.lastErrLine().startsWith("longsieve run stopped: the output folder " + out), first.lastErrLine());

    JobTestSupport.Cli again = run(in, out.toString(), "again", "--resume");
    assertEquals(0, again.code(), again.err());
    assertEveryDocumentOnce(out, 6);
  }

  @Test
  void aSparkFailureReasonIsQuotedInOneLine() {
    var lost = new org.apache.spark.SparkException("Job aborted due to stage failure: Task 2 in stage 5.0 failed 4 times, "
        + "most recent failure: Lost task 2.3 in stage 5.0 (TID 21) (10.0.0.7 executor 3): ExecutorLostFailure (executor 3 "
        + "exited caused by one of the running tasks) Reason: Command exited with code 45\nDriver stacktrace:\n\tat x.y(z)");
    assertEquals("Spark gave up after the task's retries: Task 2 in stage 5.0 failed 4 times, most recent failure: Lost task "
        + "2.3 in stage 5.0 (TID 21) (10.0.0.7 executor 3): ExecutorLostFailure (executor 3 exited caused by one of the "
        + "running tasks) Reason: Command exited with code 45", RunFault.sparkGaveUp(new RuntimeException(lost)));
    assertEquals("No space left on device", RunFault.noSpace(new org.apache.spark.SparkException(
        "Job aborted due to stage failure: ... org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device")));
  }

  /** Every doc_id d0..d{n-1} has exactly one ok row in outputs and one row in stats of that same run. */
  private void assertEveryDocumentOnce(Path out, int documents) {
    Map<String, List<String>> ok = new HashMap<>();
    for (Row r : spark.read().parquet(out.resolve("outputs").toString()).where(col("status").equalTo("ok"))
        .select("doc_id", "run_id").collectAsList()) {
      ok.computeIfAbsent(r.getString(0), k -> new ArrayList<>()).add(r.getString(1));
    }
    Map<String, List<String>> stats = new HashMap<>();
    for (Row r : spark.read().parquet(out.resolve("stats").toString()).select("doc_id", "run_id").collectAsList()) {
      stats.computeIfAbsent(r.getString(0), k -> new ArrayList<>()).add(r.getString(1));
    }
    for (int i = 0; i < documents; i++) {
      String id = "d" + i;
      assertEquals(1, ok.getOrDefault(id, List.of()).size(), id + " ok in runs " + ok.get(id));
      assertEquals(ok.get(id), stats.get(id), id + ": its one stats row is the ok run's");
    }
  }
}
