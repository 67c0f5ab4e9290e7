package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * A Qwen3-shaped checkpoint with YaRN (the tiny qwen3-yarn fixture: q/k norms, head_dim 16, YaRN
 * factor 4 over an original window of 64) through {@code longsieve run} on the CPU, its documents
 * reaching past three times the original window and up to four times it, the whole YaRN context.
 * {@code --device auto} runs it on the CPU: its CUDA path is not verified on a GPU yet.
 */
class FamilyJobTest {

  static final Path QWEN3_YARN = Path.of("..", "gpu-engine", "src", "test", "resources", "models", "qwen3-yarn")
      .toAbsolutePath().normalize();

  @Test
  void qwen3WithYarnRunsAtFourTimesItsOriginalWindow(@TempDir Path dir) {
    SparkSession spark = JobTestSupport.session();
    try {
      Path input = JobTestSupport.jsonl(dir, "docs.jsonl",
          JobTestSupport.json("yarn-long", "summary", String.join(" ", JobTestSupport.words(72)), null),
          JobTestSupport.json("yarn-short", "summary", "The council approved the winter budget.", null));
      Path out = dir.resolve("out");
      StringWriter so = new StringWriter(), se = new StringWriter();
      CommandLine cl = JobCli.commandLine();
      cl.setOut(new PrintWriter(so, true));
      cl.setErr(new PrintWriter(se, true));
      int rc = cl.execute("run", "--model", QWEN3_YARN.toString(), "--master", "local[2]", "--input", input.toString(),
          "--output", out.toString(), "--run-id", "yarn", "--max-new-tokens", "40", "--device", "auto",
          "--conf", "spark.longsieve.threads=1");
      assertEquals(0, rc, so + "\n" + se);
      List<Row> rows = spark.read().parquet(out.resolve("outputs").toString()).where(col("run_id").equalTo("yarn"))
          .collectAsList();
      assertEquals(2, rows.size());
      for (Row r : rows) assertEquals(JobSchemas.OK, r.getAs("status"), r.toString());
      Row stats = spark.read().parquet(out.resolve("stats").toString())
          .where(col("run_id").equalTo("yarn").and(col("doc_id").equalTo("yarn-long"))).first();
      int in = stats.getAs("input_tokens"), gen = stats.getAs("output_tokens");
      assertTrue(in > 3 * 64, "prompt of " + in + " tokens: past three original windows");
      assertTrue(in + gen <= 4 * 64 && in + gen > 3 * 64 + 16, in + " + " + gen + " tokens: within the YaRN context of 256");
      assertEquals("cpu", stats.getAs("backend"));
    } finally {
      spark.stop();
    }
  }
}
