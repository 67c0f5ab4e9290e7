package io.longsieve.report;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Pattern;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** Reports over runs written in the job's layout: a 100,000-document run stays a small page of aggregates. */
class RunReportTest {

  static SparkSession spark;

  @BeforeAll
  static void start() {
    spark = ReportFixture.spark();
  }

  @AfterAll
  static void stop() {
    spark.stop();
  }

  @Test
  void hundredThousandDocumentsMakeASmallPageOfAggregates(@TempDir Path out) throws Exception {
    ReportFixture.writeRun(spark, out, "20261129-080000-big", 100_000, 3_600_000);

    long t0 = System.nanoTime();
    Path file = RunReport.write(spark, out, "20261129-080000-big");
    System.out.printf("report over 100,000 documents: %.1f s, %,d bytes%n", (System.nanoTime() - t0) / 1e9,
        Files.size(file));

    assertEquals(out.resolve("report/20261129-080000-big.html"), file);
    String html = Files.readString(file);
    assertTrue(Files.size(file) < 1_500_000, "page holds aggregates only, was " + Files.size(file) + " bytes");
    assertTrue(html.contains(">100,000<"), "document count card");
    assertTrue(html.contains(">27.8<"), "documents / s = 100,000 / 3,600 s");
    assertTrue(html.contains("prefill saved by prefix reuse") && html.contains(" of prefill<"), "the prefix reuse card");
    long points = Pattern.compile("<circle ").matcher(html).results().count();
    assertTrue(points > 0 && points <= 2 * RunAggregator.SCATTER_CAP, "scatter points capped, was " + points);
    // user data is escaped, never interpreted
    assertFalse(html.contains("<img src=x"));
    assertTrue(html.contains("bad input &lt;img src=x onerror=alert(1)&gt; &amp; more"));
    assertFalse(html.contains("<script"));
    // errors are grouped: one row for the out-of-memory message with its count
    long oom = 99_999 / 97 + 1; // ids 0, 97, 194, ... below 100,000
    assertTrue(html.contains("<td class=\"n\">" + String.format("%,d", oom) + "</td>"), "OOM group count");
    // four executors in the straggler view, the heatmap has one row per sparse policy
    assertTrue(html.contains("data-chart=\"executor-busy\""));
    assertTrue(html.contains(">tsa + tokenselect:k=2048<") && html.contains("data-chart=\"heatmap-layers\""));
    assertTrue(html.contains("No eval results"));
  }

  @Test
  void thePageAndTheNotebooksFileShowOneSetOfExactQuantiles(@TempDir Path out) throws Exception {
    String runId = "20261129-100000-q";
    ReportFixture.writeRun(spark, out, runId, 101, 10_000);
    RunReport.write(spark, out, runId);

    JsonNode q = new ObjectMapper().readTree(out.resolve("report/" + runId + ".quantiles.json").toFile());
    // the documents the engine ran, sorted: rank-interpolated quantiles computed here independently
    double[] total = spark.read().parquet(out.resolve("stats").toString()).where("run_id = '" + runId + "'")
        .where("backend is not null and total_ms is not null").select("total_ms").collectAsList().stream()
        .mapToDouble(r -> ((Number) r.get(0)).doubleValue()).sorted().toArray();
    assertEquals(total.length, q.get("total_ms").get("documents").asLong());
    String html = Files.readString(out.resolve("report/" + runId + ".html"));
    for (String name : Quantiles.NAMES) {
      double level = Integer.parseInt(name.substring(1)) / 100.0;
      double pos = level * (total.length - 1);
      int lo = (int) Math.floor(pos);
      double expected = total[lo] + (pos - lo) * (total[Math.min(lo + 1, total.length - 1)] - total[lo]);
      assertEquals(expected, q.get("total_ms").get(name).asDouble(), 1e-9, name);
      assertTrue(html.contains("<th class=\"n\">" + name + "</th>"), "the page's latency table has " + name);
      assertTrue(html.contains(">" + Html.duration(expected) + "<"), "the page shows " + name + " " + expected);
    }
    for (String policy : List.of(ReportFixture.DENSE, ReportFixture.TOKENSELECT)) {
      assertTrue(q.get("total_ms_by_policy").get(policy).get("p50").isNumber(), q.toString());
    }
  }

  @Test
  void commandReportsTheNewestRunWithItsEval(@TempDir Path out) throws Exception {
    ReportFixture.writeRun(spark, out, "20261129-070000-old", 50, 10_000);
    ReportFixture.writeRun(spark, out, "20261129-090000-new", 60, 12_000);
    ReportFixture.writeEval(spark, out, "20261129-090000-new");
    Files.setLastModifiedTime(out.resolve("runs/20261129-070000-old.json"),
        java.nio.file.attribute.FileTime.fromMillis(0));

    int rc = new CommandLine(new ReportCommand()).execute("--output", out.toString());

    assertEquals(0, rc);
    assertFalse(Files.exists(out.resolve("report/20261129-070000-old.html")));
    String html = Files.readString(out.resolve("report/20261129-090000-new.html"));
    assertTrue(html.contains("LongSieve run 20261129-090000-new"));
    assertTrue(html.contains("data-chart=\"eval-policy\"") && html.contains("data-chart=\"eval-heatmap\""));
    assertTrue(html.contains(">12 s<"), "wall time from the manifest");
  }
}
