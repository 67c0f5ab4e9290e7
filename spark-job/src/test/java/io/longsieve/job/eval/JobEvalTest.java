package io.longsieve.job.eval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.job.JobCli;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code longsieve eval} through the real Spark job (local mode) on the tiny llama-gqa
 * checkpoint: two policies over a CI-sized suite, results as Parquet with the documented columns.
 */
class JobEvalTest {

  static final Path MODEL = Path.of("..", "gpu-engine", "src", "test", "resources", "models", "llama-gqa")
      .toAbsolutePath().normalize();

  @Test
  void twoPoliciesThroughTheSparkJob(@TempDir Path out) {
    int rc = JobCli.commandLine().execute("eval", "--model", MODEL.toString(), "--output", out.toString(),
        "--tasks", "niah_single,mdqa", "--lengths", "1", "--train-length", "384", "--per-cell", "1",
        "--policies", "ci", "--device", "cpu", "--threads", "1", "--run-id", "jobeval", "--master", "local[2]",
        "--max-new-tokens", "6");
    assertEquals(0, rc);
    SparkSession spark = SparkSession.builder().master("local[1]").config("spark.ui.enabled", "false").getOrCreate();
    try {
      List<Row> rows = spark.read().parquet(out.resolve("eval/results").toString())
          .select("run_id", "task", "length", "policy", "accuracy", "attended_fraction", "ms_per_doc", "n_docs", "n_errors")
          .orderBy("task", "policy").collectAsList();
      assertEquals(4, rows.size(), "2 tasks x 1 length x 2 policies");
      for (Row r : rows) {
        assertEquals("jobeval", r.getString(0));
        assertEquals(384, r.getInt(2));
        assertEquals(1, r.getInt(7), "documents per cell");
        assertEquals(0, r.getInt(8), "no errors");
        assertTrue(r.getDouble(4) >= 0 && r.getDouble(4) <= 1);
        assertTrue(r.getDouble(6) > 0, "time per document");
      }
      assertEquals(List.of("dense", "tokenselect:k_frac=0.1,sinks=16,window=64"),
          rows.subList(0, 2).stream().map(r -> r.getString(3)).toList());
      assertEquals(1.0, rows.get(0).getDouble(5), 1e-9, "dense attends to everything");
      assertTrue(rows.get(1).getDouble(5) < 1.0, "TokenSelect skips pairs");
      assertEquals(2, spark.read().parquet(out.resolve("eval/job/outputs").toString()).select("run_id").distinct().count(),
          "one job run per policy");
      assertTrue(Files.readString(out.resolve("eval/results.md")).contains("mdqa @ 384"));
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    } finally {
      spark.stop();
    }
  }
}
