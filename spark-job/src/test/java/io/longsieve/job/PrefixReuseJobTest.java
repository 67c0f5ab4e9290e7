package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Prefix reuse through the job (docs/prefix-reuse.md): questions over one document are placed in one
 * partition and all but the first start from the document's kept KV cache; every answer is the one the
 * run without reuse gives; prefix_tokens_reused says which rows reused how much; the option turns it off.
 */
class PrefixReuseJobTest {

  private static SparkSession spark;
  private static final Map<String, Row> ON = new HashMap<>(), OFF = new HashMap<>();

  @TempDir
  static Path dir;

  @BeforeAll
  static void run() {
    spark = JobTestSupport.session();
    List<String> lines = new ArrayList<>();
    for (String doc : List.of("a", "b")) {
      String text = String.join(" ", JobTestSupport.words(doc.equals("a") ? 120 : 90)) + " The " + doc + " mill opened in 19"
          + (doc.equals("a") ? "12" : "31") + ".";
      for (int q = 0; q < 4; q++) {
        lines.add(JobTestSupport.json(doc + q, "qa", text, "Question " + q + ": when did the mill open?"));
      }
    }
    lines.add(JobTestSupport.json("single", "qa", String.join(" ", JobTestSupport.words(100)), "Who runs the farm?"));
    lines.add(JobTestSupport.json("summary", "summary", String.join(" ", JobTestSupport.words(110)), null));
    Path in = JobTestSupport.jsonl(dir, "docs.jsonl", lines.toArray(new String[0]));
    Map<String, String> common = Map.of("spark.longsieve.prefillChunk", "64", "spark.longsieve.partitions", "2",
        "spark.longsieve.maxNewTokens", "6");
    LongSieveJob.run(spark, JobTestSupport.options(in, dir.resolve("out"), "on", common));
    Map<String, String> off = new HashMap<>(common);
    off.put("spark.longsieve.prefixReuse", "false");
    LongSieveJob.run(spark, JobTestSupport.options(in, dir.resolve("out"), "off", off));
    for (Row r : stats("on")) ON.put(r.getAs("doc_id"), r);
    for (Row r : stats("off")) OFF.put(r.getAs("doc_id"), r);
  }

  private static List<Row> stats(String runId) {
    String out = dir.resolve("out").toString();
    return spark.read().parquet(out + "/stats").where(col("run_id").equalTo(runId))
        .join(spark.read().parquet(out + "/outputs").where(col("run_id").equalTo(runId)).select("doc_id", "output"),
            "doc_id").collectAsList();
  }

  @AfterAll
  static void stop() {
    spark.stop();
  }

  @Test
  void everyAnswerIsTheOneTheRunWithoutReuseGives() {
    assertEquals(10, ON.size());
    for (String id : OFF.keySet()) {
      assertEquals(JobSchemas.OK, ON.get(id).getAs("status"), id);
      assertEquals((String) OFF.get(id).getAs("output"), ON.get(id).getAs("output"), id);
      assertEquals((int) OFF.get(id).getAs("output_tokens"), (int) ON.get(id).getAs("output_tokens"), id);
    }
  }

  @Test
  void aDocumentsQuestionsRunInOnePartitionAndAllButOneReuseItsPrefix() {
    for (String doc : List.of("a", "b")) {
      Set<Integer> partitions = new HashSet<>();
      int reusing = 0;
      for (int q = 0; q < 4; q++) {
        Row r = ON.get(doc + q);
        partitions.add(r.getAs("partition_id"));
        int reused = r.getAs("prefix_tokens_reused");
        if (reused > 0) {
          reusing++;
          assertTrue(reused < (int) r.getAs("input_tokens"), "the question is the row's own: " + r);
        }
      }
      assertEquals(1, partitions.size(), doc + "'s questions in one partition: " + partitions);
      assertEquals(3, reusing, doc + ": all but the first start from the kept prefix");
    }
    assertEquals(0, (int) ON.get("single").getAs("prefix_tokens_reused"));
    assertEquals(0, (int) ON.get("summary").getAs("prefix_tokens_reused"));
  }

  @Test
  void turnedOffNoRowReuses() {
    for (Row r : OFF.values()) assertEquals(0, (int) r.getAs("prefix_tokens_reused"), r.toString());
  }
}
