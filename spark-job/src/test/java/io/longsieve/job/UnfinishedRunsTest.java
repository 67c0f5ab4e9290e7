package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.report.RunReport;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;

/**
 * Runs that hold less than their input: an empty input, and a run killed between its stats and
 * outputs commits (made here by removing its manifest and one commit's outputs files, which is
 * what a kill at that point leaves), or whose stats were lost under it. Stats and outputs stay
 * exactly once across the kill and --resume.
 */
class UnfinishedRunsTest extends SparkSessionTest {

  private Path documents(int n) {
    String[] lines = new String[n];
    for (int i = 0; i < n; i++) lines[i] = JobTestSupport.json("d" + i, "summary", "Report " + i + " on the bridge.", null);
    return JobTestSupport.jsonl(dir, "docs.jsonl", lines);
  }

  @Test
  void anEmptyInputWritesTheManifestAndTheReportWithZeroRows() throws Exception {
    Path input = Files.writeString(dir.resolve("empty.jsonl"), "\n\n");
    Path out = dir.resolve("out");
    RunSummary s = LongSieveJob.run(spark, JobTestSupport.options(input, out, "empty", Map.of()));
    assertEquals(0, s.rows());
    JsonNode manifest = new ObjectMapper().readTree(out.resolve("runs").resolve("empty.json").toFile());
    assertEquals(0, manifest.get("rows").asInt());
    String html = Files.readString(out.resolve("report").resolve("empty.html"));
    assertTrue(html.contains("LongSieve run empty"), "the report was written");
  }

  @Test
  void aRunKilledBeforeItsFirstOutputsCommitHasAReportSayingItHoldsNothing() throws Exception {
    Path input = documents(3);
    Path out = dir.resolve("out");
    LongSieveJob.run(spark, JobTestSupport.options(input, out, "early", Map.of("spark.longsieve.maxNewTokens", "2")));
    Files.delete(out.resolve("runs").resolve("early.json"));
    deleteTree(out.resolve("outputs").resolve("run_id=early")); // the kill came after its first stats commit
    Path report = RunReport.write(spark, out, "early");
    String html = Files.readString(report);
    assertTrue(html.contains("this run did not finish"), html);
    assertTrue(html.contains("Its tables hold the 0 documents it committed"), "its stats rows are not counted");
  }

  @Test
  void statsRowsOfAKilledRunThatNeverReachedOutputsAreRemovedSoResumeLeavesEachDocumentOnce() throws Exception {
    int n = 8;
    Path input = documents(n);
    Path out = dir.resolve("out");
    LongSieveJob.run(spark, JobTestSupport.options(input, out, "dead", Map.of("spark.longsieve.slices", "2",
        "spark.longsieve.partitions", "2", "spark.longsieve.maxNewTokens", "2")));
    Files.delete(out.resolve("runs").resolve("dead.json"));
    Path outputs = out.resolve("outputs").resolve("run_id=dead");
    // each commit is one Spark job; its files share the job's UUID: drop the last commit's outputs
    Map<String, List<Path>> byJob;
    try (var files = Files.list(outputs)) {
      byJob = files.filter(f -> f.getFileName().toString().startsWith("part-"))
          .collect(Collectors.groupingBy(f -> f.getFileName().toString().substring(11, 47)));
    }
    assertEquals(2, byJob.size(), "two commit slices: " + byJob.keySet());
    for (Path f : byJob.values().iterator().next()) Files.delete(f);
    long committed = spark.read().parquet(outputs.toString()).count();
    assertTrue(committed > 0 && committed < n, committed + " of " + n);

    String html = Files.readString(RunReport.write(spark, out, "dead"));
    assertTrue(html.contains("Its tables hold the " + committed + " documents it committed"), "the report counts "
        + "only documents that reached outputs");

    RunSummary resumed = LongSieveJob.run(spark, JobTestSupport.options(input, out, "resumed",
        Map.of("spark.longsieve.resume", "true", "spark.longsieve.maxNewTokens", "2")));
    assertEquals(n - committed, resumed.rows());
    for (String table : new String[] {"stats", "outputs"}) {
      List<Row> perDoc = spark.read().parquet(out.resolve(table).toString()).groupBy("doc_id").count()
          .where(col("count").notEqual(1)).collectAsList();
      assertEquals(List.of(), perDoc, table + ": every document exactly once across the killed and the resumed run");
    }
    JsonNode record = new ObjectMapper().readTree(out.resolve("runs").resolve("dead.unfinished").toFile());
    assertEquals(committed, record.get("committed_documents").asLong());
    assertEquals(n - committed, record.get("stats_rows_removed").asLong());
    assertFalse(Files.exists(out.resolve("_repair")));
  }

  @Test
  void outputsRowsWhoseStatsWereLostAreRemovedSoResumeLeavesEachDocumentOnce() throws Exception {
    int n = 8;
    Path input = documents(n);
    Path out = dir.resolve("out");
    LongSieveJob.run(spark, JobTestSupport.options(input, out, "lost", Map.of("spark.longsieve.slices", "2",
        "spark.longsieve.partitions", "2", "spark.longsieve.maxNewTokens", "2")));
    Files.delete(out.resolve("runs").resolve("lost.json"));
    // what an output folder removed under the run leaves: one commit's outputs whose stats are gone
    Path stats = out.resolve("stats").resolve("run_id=lost");
    Map<String, List<Path>> byJob;
    try (var files = Files.list(stats)) {
      byJob = files.filter(f -> f.getFileName().toString().startsWith("part-"))
          .collect(Collectors.groupingBy(f -> f.getFileName().toString().substring(11, 47)));
    }
    assertEquals(2, byJob.size(), "two commit slices: " + byJob.keySet());
    for (Path f : byJob.values().iterator().next()) Files.delete(f);
    long withStats = spark.read().parquet(stats.toString()).count();
    assertTrue(withStats > 0 && withStats < n, withStats + " of " + n);

    RunSummary resumed = LongSieveJob.run(spark, JobTestSupport.options(input, out, "again",
        Map.of("spark.longsieve.resume", "true", "spark.longsieve.maxNewTokens", "2")));
    assertEquals(n - withStats, resumed.rows());
    for (String table : new String[] {"stats", "outputs"}) {
      List<Row> perDoc = spark.read().parquet(out.resolve(table).toString()).groupBy("doc_id").count()
          .where(col("count").notEqual(1)).collectAsList();
      assertEquals(List.of(), perDoc, table + ": every document exactly once across the two runs");
    }
    JsonNode record = new ObjectMapper().readTree(out.resolve("runs").resolve("lost.unfinished").toFile());
    assertEquals(withStats, record.get("committed_documents").asLong());
    assertEquals(n - withStats, record.get("outputs_rows_removed").asLong());
    assertEquals(0, record.get("stats_rows_removed").asLong());
    assertFalse(Files.exists(out.resolve("_repair_outputs")));
  }

  private static void deleteTree(Path p) throws Exception {
    try (var walk = Files.walk(p)) {
      for (Path f : walk.sorted(java.util.Comparator.reverseOrder()).toList()) Files.delete(f);
    }
  }
}
