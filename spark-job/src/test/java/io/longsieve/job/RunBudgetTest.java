package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;

/**
 * Run budgets: past --max-docs or --max-total-tokens the remaining documents (input order) get
 * budget_exceeded rows without running; the manifest says the budget was spent; a later --resume
 * run processes exactly those documents.
 */
class RunBudgetTest extends SparkSessionTest {

  Path input(String name, int n) {
    String[] lines = new String[n];
    for (int i = 0; i < n; i++) lines[i] = JobTestSupport.json("d" + i, "summary", "Note " + i + " on the bridge.", null);
    return JobTestSupport.jsonl(dir, name, lines);
  }

  static Map<String, String> statuses(Path out, String runId) {
    Map<String, String> m = new HashMap<>();
    for (Row r : spark.read().parquet(out.resolve("outputs").toString()).where(col("run_id").equalTo(runId))
        .select("doc_id", "status").collectAsList()) {
      m.put(r.getString(0), r.getString(1));
    }
    return m;
  }

  static JsonNode manifest(Path out, String runId) throws IOException {
    return new ObjectMapper().readTree(Files.readString(out.resolve("runs").resolve(runId + ".json")));
  }

  @Test
  void maxDocsRunsTheFirstDocumentsAndResumeRunsTheRest() throws IOException {
    Path in = input("docs.jsonl", 5);
    Path out = dir.resolve("out-docs");
    RunSummary s = LongSieveJob.run(spark, JobTestSupport.options(in, out, "budget", Map.of("spark.longsieve.maxDocs", "2")));
    assertEquals(2L, s.byStatus().get(JobSchemas.OK), s.line());
    assertEquals(3L, s.byStatus().get(JobSchemas.BUDGET_EXCEEDED), s.line());
    Map<String, String> st = statuses(out, "budget");
    assertEquals(Map.of("d0", "ok", "d1", "ok", "d2", "budget_exceeded", "d3", "budget_exceeded", "d4", "budget_exceeded"), st);
    Row err = spark.read().parquet(out.resolve("outputs").toString()).where(col("doc_id").equalTo("d3")).select("error").first();
    assertTrue(err.getString(0).contains("--max-docs 2") && err.getString(0).contains("--resume"), err.getString(0));
    JsonNode b = manifest(out, "budget").get("budget");
    assertTrue(b.get("spent").asBoolean());
    assertEquals(2, b.get("admitted_docs").asLong());
    assertEquals(3, b.get("budget_exceeded").asLong());
    assertEquals(3, manifest(out, "budget").get("counts").get("budget_exceeded").asLong());

    RunSummary r = LongSieveJob.run(spark, JobTestSupport.options(in, out, "rest", Map.of("spark.longsieve.resume", "true")));
    assertEquals(Map.of("d2", "ok", "d3", "ok", "d4", "ok"), statuses(out, "rest"), r.line());
  }

  @Test
  void maxTotalTokensStopsAtTheFirstDocumentThatDoesNotFit() throws IOException {
    Path in = input("tokens.jsonl", 6);
    Path out = dir.resolve("out-tokens");
    RunOptions probe = JobTestSupport.options(in, out, "tok", Map.of());
    // the documents are of equal size ("Note i on the bridge."): room for three reservations, not four
    long one = RunBudget.reservation("Note 0 on the bridge.".length(), probe.maxNewTokens(), probe);
    RunSummary s = LongSieveJob.run(spark, JobTestSupport.options(in, out, "tok",
        Map.of("spark.longsieve.maxTotalTokens", Long.toString(3 * one + one / 2))));
    assertEquals(3L, s.byStatus().get(JobSchemas.OK), s.line());
    assertEquals(List.of("d3", "d4", "d5"), statuses(out, "tok").entrySet().stream()
        .filter(e -> e.getValue().equals(JobSchemas.BUDGET_EXCEEDED)).map(Map.Entry::getKey).sorted().toList());
    JsonNode b = manifest(out, "tok").get("budget");
    assertEquals(3 * one, b.get("reserved_tokens").asLong());
    assertTrue(b.get("tokens_used").asLong() > 0, b.toString());
  }

  @Test
  void withoutABudgetTheManifestHasNoBudgetEntry() throws IOException {
    Path in = input("free.jsonl", 2);
    Path out = dir.resolve("out-free");
    LongSieveJob.run(spark, JobTestSupport.options(in, out, "free", Map.of()));
    assertTrue(manifest(out, "free").get("budget") == null);
  }

  @Test
  void aRowsOwnMaxNewTokensIsWhatItReserves() throws IOException {
    // d1 asks for 200 new tokens: with room for two run-sized reservations plus a little, it does not fit
    Path in = JobTestSupport.jsonl(dir, "own.jsonl", JobTestSupport.json("d0", "summary", "Note 0 on the bridge.", null),
        "{\"doc_id\":\"d1\",\"task\":\"summary\",\"text\":\"Note 1 on the bridge.\",\"max_new_tokens\":200}",
        JobTestSupport.json("d2", "summary", "Note 2 on the bridge.", null));
    Path out = dir.resolve("out-own");
    RunOptions probe = JobTestSupport.options(in, out, "own", Map.of());
    long one = RunBudget.reservation("Note 0 on the bridge.".length(), probe.maxNewTokens(), probe);
    LongSieveJob.run(spark, JobTestSupport.options(in, out, "own",
        Map.of("spark.longsieve.maxTotalTokens", Long.toString(2 * one + 10))));
    assertEquals(Map.of("d0", "ok", "d1", JobSchemas.BUDGET_EXCEEDED, "d2", JobSchemas.BUDGET_EXCEEDED), statuses(out, "own"));
  }
}
