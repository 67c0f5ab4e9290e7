package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * --resume after the driver was killed (SIGKILL, no shutdown hooks) or stopped (SIGTERM: one line,
 * exit 143) half-way: the first run keeps the slices it committed, the resumed run does the rest, and
 * every doc_id ends with exactly one ok row across the two runs.
 */
@Tag("cluster")
class ResumeAfterKilledDriverTest {

  @TempDir
  Path dir;

  @Test
  void aDriverKilledHalfWayThenResumedLeavesEveryDocumentExactlyOnceOk() throws Exception {
    int n = 40;
    String[] lines = new String[n];
    for (int i = 0; i < n; i++) {
      lines[i] = JobTestSupport.json("d" + i, "summary", "Report " + i + ": " + String.join(" ", JobTestSupport.words(80)), null);
    }
    Path input = JobTestSupport.jsonl(dir, "docs.jsonl", lines);
    Path out = dir.resolve("out");

    // run 1 in its own driver JVM, four commit slices; killed once its first slice is in outputs/
    Process driver = startDriver(input, out, "first");
    Path firstRows = out.resolve("outputs").resolve("run_id=first");
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(5);
    while (!Files.isDirectory(firstRows) && driver.isAlive() && System.nanoTime() < deadline) Thread.sleep(100);
    driver.destroyForcibly().waitFor();
    assertTrue(Files.isDirectory(firstRows), "the first run committed a slice before it was killed; log: "
        + dir.resolve("driver.err"));
    assertFalse(Files.exists(out.resolve("runs").resolve("first.json")), "the first run did not finish");

    SparkSession spark = JobTestSupport.session();
    long firstOk = spark.read().parquet(out.resolve("outputs").toString())
        .where(col("run_id").equalTo("first").and(col("status").equalTo("ok"))).count();
    assertTrue(firstOk > 0 && firstOk < n, "killed half-way: " + firstOk + " of " + n + " done");

    // run 2: --resume in this JVM
    RunSummary second = LongSieveJob.run(spark, JobTestSupport.options(input, out, "second",
        Map.of("spark.longsieve.resume", "true", "spark.longsieve.maxNewTokens", "8")));
    assertEquals(n - firstOk, second.rows(), "the resumed run skipped exactly the documents already ok");

    Map<String, List<String>> okRuns = new HashMap<>();
    for (Row r : spark.read().parquet(out.resolve("outputs").toString()).where(col("status").equalTo("ok"))
        .select("doc_id", "run_id").collectAsList()) {
      okRuns.computeIfAbsent(r.getString(0), k -> new ArrayList<>()).add(r.getString(1));
    }
    assertEquals(n, okRuns.size(), "every document is done");
    okRuns.forEach((id, runs) -> assertEquals(1, runs.size(), id + " has ok rows in runs " + runs));

    JsonNode manifest = new ObjectMapper().readTree(out.resolve("runs").resolve("second.json").toFile());
    assertEquals("[\"first\"]", manifest.get("resumed_from").toString());
  }

  @Test
  void aDriverStoppedBySigtermSaysSoInOneLineThenResumeCompletesTheRun() throws Exception {
    int n = 24;
    String[] lines = new String[n];
    for (int i = 0; i < n; i++) {
      lines[i] = JobTestSupport.json("t" + i, "summary", "Note " + i + ": " + String.join(" ", JobTestSupport.words(60)), null);
    }
    Path input = JobTestSupport.jsonl(dir, "notes.jsonl", lines);
    Path out = dir.resolve("out-term");

    Process driver = startDriver(input, out, "termed");
    Path firstRows = out.resolve("outputs").resolve("run_id=termed");
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(5);
    while (!Files.isDirectory(firstRows) && driver.isAlive() && System.nanoTime() < deadline) Thread.sleep(100);
    assertTrue(driver.isAlive(), "still running after its first commit; log: " + dir.resolve("driver.log"));
    driver.destroy(); // SIGTERM
    assertTrue(driver.waitFor(2, TimeUnit.MINUTES), "the driver ends after SIGTERM");
    assertEquals(143, driver.exitValue(), "128 + SIGTERM; stderr: " + Files.readString(dir.resolve("driver.err")));

    List<String> err = Files.readAllLines(dir.resolve("driver.err"));
    List<String> stopped = err.stream().filter(l -> l.contains(" stopped: ")).toList();
    assertEquals(1, stopped.size(), "one line says what happened: " + err);
    // the first slice's folder shows while its commit is still going on, so the driver may not count it yet
    assertTrue(stopped.get(0).matches("longsieve run termed stopped: SIGTERM before the run finished; (\\d+ of 4 commit slices "
        + "are committed and kept|no commit slice was committed yet): run the same command with --resume to finish it"),
        stopped.get(0));
    assertTrue(err.stream().noneMatch(l -> l.startsWith("\tat ") || l.contains("Exception")), "no stack trace: " + err);

    SparkSession spark = JobTestSupport.session();
    RunSummary resumed = LongSieveJob.run(spark, JobTestSupport.options(input, out, "after-term",
        Map.of("spark.longsieve.resume", "true", "spark.longsieve.maxNewTokens", "8")));
    assertTrue(resumed.rows() < n, "the resumed run skipped what the stopped run committed");
    Map<String, List<String>> okRuns = new HashMap<>();
    for (Row r : spark.read().parquet(out.resolve("outputs").toString()).where(col("status").equalTo("ok"))
        .select("doc_id", "run_id").collectAsList()) {
      okRuns.computeIfAbsent(r.getString(0), k -> new ArrayList<>()).add(r.getString(1));
    }
    assertEquals(n, okRuns.size(), "every document is done");
    okRuns.forEach((id, runs) -> assertEquals(1, runs.size(), id + " has ok rows in runs " + runs));
  }

  /** `longsieve run` in a child JVM with this JVM's flags and class path; stdout to driver.log, stderr to driver.err. */
  private Process startDriver(Path input, Path out, String runId) throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(ProcessHandle.current().info().command().orElse("java"));
    for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
      if (a.startsWith("--add-") || a.startsWith("-D") || a.startsWith("-Xss")) cmd.add(a);
    }
    cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), "io.longsieve.job.JobCli", "run",
        "--input", input.toString(), "--output", out.toString(), "--model", JobTestSupport.MODEL.toString(),
        "--run-id", runId, "--master", "local[2]", "--device", "cpu", "--max-new-tokens", "8",
        "--conf", "spark.longsieve.threads=1", "--conf", "spark.longsieve.partitions=8",
        "--conf", "spark.longsieve.slices=4", "--conf", "spark.ui.enabled=false"));
    return new ProcessBuilder(cmd).redirectOutput(dir.resolve("driver.log").toFile())
        .redirectError(dir.resolve("driver.err").toFile()).start();
  }
}
