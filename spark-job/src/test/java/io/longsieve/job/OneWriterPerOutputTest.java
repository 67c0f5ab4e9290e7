package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;

/** Two runs started together on one output: one is refused at once, the other's output is complete. */
class OneWriterPerOutputTest extends SparkSessionTest {

  @Test
  void twoRunsStartedTogetherOnOneOutputGiveOneRefusalAndOneCompleteOutput() throws Exception {
    int n = 6;
    String[] lines = new String[n];
    for (int i = 0; i < n; i++) lines[i] = JobTestSupport.json("d" + i, "summary", "Report " + i + " on the harbour.", null);
    Path input = JobTestSupport.jsonl(dir, "docs.jsonl", lines);
    Path out = dir.resolve("out");
    CountDownLatch go = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    List<Future<RunSummary>> runs = new ArrayList<>();
    for (String id : new String[] {"left", "right"}) {
      RunOptions o = JobTestSupport.options(input, out, id, Map.of("spark.longsieve.maxNewTokens", "2"));
      runs.add(pool.submit(() -> {
        go.await();
        return LongSieveJob.run(spark, o);
      }));
    }
    go.countDown();
    List<String> refusals = new ArrayList<>();
    String winner = null;
    for (Future<RunSummary> f : runs) {
      try {
        winner = f.get(5, TimeUnit.MINUTES).runId();
      } catch (java.util.concurrent.ExecutionException e) {
        assertTrue(e.getCause() instanceof IllegalArgumentException, e.getCause().toString());
        refusals.add(e.getCause().getMessage());
      }
    }
    pool.shutdown();
    assertEquals(1, refusals.size(), "exactly one run refused: " + refusals);
    assertNotNull(winner);
    String loser = winner.equals("left") ? "right" : "left";
    assertTrue(refusals.get(0).startsWith("--output " + out + " is in use by run " + winner + " (started "),
        refusals.get(0));

    JsonNode manifest = new ObjectMapper().readTree(out.resolve("runs").resolve(winner + ".json").toFile());
    assertEquals(n, manifest.get("rows").asInt());
    assertEquals(n, manifest.get("counts").get("ok").asInt());
    assertEquals(n, spark.read().parquet(out.resolve("outputs").toString()).where(col("run_id").equalTo(winner))
        .select("doc_id").distinct().count(), "every document once");
    assertEquals(n, spark.read().parquet(out.resolve("stats").toString()).where(col("run_id").equalTo(winner)).count());
    assertFalse(Files.exists(out.resolve("runs").resolve(loser + ".started")), "the refused run reserved nothing");
    assertFalse(Files.exists(out.resolve("_staging")), "the winner's staging is gone, the loser never had one");
  }

  @Test
  void theSameRunIdGivenTwiceCannotPassTwice() throws Exception {
    Path input = JobTestSupport.jsonl(dir, "one.jsonl", JobTestSupport.json("a", "summary", "One.", null));
    Path out = dir.resolve("out2");
    RunOptions o = JobTestSupport.options(input, out, "same", Map.of("spark.longsieve.maxNewTokens", "2"));
    LongSieveJob.run(spark, o);
    IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
        () -> LongSieveJob.run(spark, o));
    assertTrue(e.getMessage().startsWith("run id 'same' was already used under"), e.getMessage());
  }
}
