package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URL;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.logging.log4j.Level;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.util.MutableURLClassLoader;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The job's plan under the RAPIDS Accelerator in explainOnly mode (no GPU needed): which operators
 * would run on the GPU. Runs with {@code mvn -Prapids-explain} (the RAPIDS jar is a test dependency
 * only there; tools/ci/install-rapids-stub-parent.sh must have run once).
 *
 * <p>RAPIDS logs one explanation per query plan as a WARN message of GpuOverrides, one operator per
 * line: {@code *Exec <FilterExec> will run on GPU}, or {@code !Exec <X> cannot run on GPU because ...}.
 */
@Tag("rapids")
class RapidsExplainTest {

  @TempDir
  Path dir;

  private static final Pattern LINE = Pattern.compile("^\\s*([*!@])Exec <(\\w+)> (will run on GPU|cannot run on GPU.*)$");

  @Test
  void parquetScanFiltersTheResumeJoinAndTheParquetWritesWouldRunOnTheGpu() {
    // RAPIDS adds its shim folders to the context class loader; on Java 17 the application class loader
    // cannot take them, so give it a mutable one (NVIDIA/spark-rapids#14506)
    Thread.currentThread().setContextClassLoader(
        new MutableURLClassLoader(new URL[0], RapidsExplainTest.class.getClassLoader()));
    SparkSession.getActiveSession().foreach(s -> { s.stop(); return null; });
    SparkSession.getDefaultSession().foreach(s -> { s.stop(); return null; });
    SparkSession spark = SparkSession.builder().master("local[2]").appName("rapids-explain")
        .config("spark.ui.enabled", "false")
        .config("spark.plugins", "com.nvidia.spark.SQLPlugin")
        .config("spark.rapids.sql.mode", "explainOnly")
        .config("spark.rapids.sql.explain", "ALL")
        // with adaptive execution, explainOnly cannot tell whether a broadcast join's build side would be on
        // the GPU and says so instead of judging the join; without it, it judges the join itself
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate();
    String explain;
    try (LogCapture cap = LogCapture.of("com.nvidia.spark.rapids.GpuOverrides", Level.WARN)) {
      // Parquet input, a first run, then a --resume run: scan, filter, the anti join, the writes
      Path input = dir.resolve("docs.parquet");
      spark.sql("SELECT concat('d', id) AS doc_id, 'summary' AS task, concat('Report number ', id, ' on the harbour budget.') AS text"
          + " FROM range(6)").write().parquet(input.toString());
      Path out = dir.resolve("out");
      LongSieveJob.run(spark, JobTestSupport.options(input, out, "first", Map.of("spark.longsieve.maxNewTokens", "2")));
      spark.sql("SELECT concat('d', id) AS doc_id, 'summary' AS task, 'More text.' AS text FROM range(4, 9)")
          .write().mode("overwrite").parquet(input.toString());
      LongSieveJob.run(spark, JobTestSupport.options(input, out, "second",
          Map.of("spark.longsieve.maxNewTokens", "2", "spark.longsieve.resume", "true")));
      explain = String.join("\n", cap.lines());
    } finally {
      spark.stop();
    }
    Map<String, Set<String>> verdicts = verdicts(explain);
    System.out.println("RAPIDS explainOnly verdicts for the job's operators: " + verdicts);
    // the Parquet writes of staging, stats and outputs
    for (String op : List.of("DataWritingCommandExec", "WriteFilesExec")) {
      assertEquals(Set.of("GPU"), verdicts.get(op), op + ": " + verdicts);
    }
    // the Parquet scans of outputs (resume) and staging; the input scan stays on the CPU because the
    // reader asks for _metadata.file_path/row_index (hidden metadata columns), which RAPIDS does not read
    assertTrue(verdicts.get("FileSourceScanExec").contains("GPU"), "a Parquet scan on the GPU: " + verdicts);
    assertTrue(verdicts.get("FilterExec").contains("GPU"), "the status = 'ok' filter on the GPU: " + verdicts);
    assertTrue(verdicts.entrySet().stream().anyMatch(e -> e.getKey().endsWith("JoinExec") && e.getValue().contains("GPU")),
        "the resume join (left anti on doc_id) on the GPU: " + verdicts);
  }

  /** Operator → the verdicts of its mentions: "GPU", or "CPU: <the reason RAPIDS gives>". */
  static Map<String, Set<String>> verdicts(String explain) {
    return explain.lines().map(LINE::matcher).filter(Matcher::matches)
        .collect(Collectors.groupingBy(m -> m.group(2), java.util.TreeMap::new,
            Collectors.mapping(m -> m.group(1).equals("*") ? "GPU" : "CPU: " + m.group(3).replace("cannot run on GPU because ", ""),
                Collectors.toCollection(java.util.TreeSet::new))));
  }
}
