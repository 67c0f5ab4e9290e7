package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shipped conf/spark-defaults.conf on a cluster without GPUs (local-cluster mode: a worker
 * JVM thread and one executor JVM, no GPU resource anywhere): the job finishes; and a GPU share
 * asked for on that cluster fails the run with one line naming the setting, within the bound,
 * instead of waiting forever.
 */
@Tag("cluster")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ShippedConfClusterTest {

  static final Path CONF = Path.of("..", "conf", "spark-defaults.conf").toAbsolutePath().normalize();

  /** Keys only a real cluster's sizes satisfy: the worker here has 1 core and 1024 MB. */
  static final Map<String, String> SIZE = Map.of("spark.executor.cores", "1", "spark.executor.memory", "1024m",
      "spark.executor.memoryOverhead", "384m");

  static Properties shipped;
  static SparkSession spark;

  @TempDir
  static Path dir;

  @BeforeAll
  static void start() throws IOException {
    shipped = new Properties();
    try (Reader r = Files.newBufferedReader(CONF, StandardCharsets.UTF_8)) {
      shipped.load(r);
    }
    SparkSession.getDefaultSession().foreach(s -> {
      s.stop();
      return null;
    });
    LocalCluster.prepareSparkHome();
    SparkSession.Builder b = SparkSession.builder().master("local-cluster[1,1,1024]").appName("longsieve-shipped-conf-test");
    for (String k : shipped.stringPropertyNames()) {
      if (k.startsWith("spark.") && !k.startsWith(RunOptions.PREFIX)) b.config(k, shipped.getProperty(k).trim());
    }
    SIZE.forEach(b::config);
    spark = b.config("spark.ui.enabled", "false")
        .config("spark.executor.extraClassPath", System.getProperty("java.class.path"))
        .config("spark.executor.extraJavaOptions", LocalCluster.executorFlags())
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate();
  }

  @AfterAll
  static void stop() {
    if (spark != null) spark.stop();
  }

  /** Options from the shipped spark.longsieve.* keys, with the test model and short answers. */
  static RunOptions options(String runId, Map<String, String> extra) {
    Map<String, String> m = new HashMap<>();
    for (String k : shipped.stringPropertyNames()) {
      if (k.startsWith(RunOptions.PREFIX)) m.put(k, shipped.getProperty(k).trim());
    }
    m.put("spark.master", spark.sparkContext().master());
    m.put("spark.longsieve.maxNewTokens", "4");
    m.put("spark.longsieve.progressIntervalSeconds", "0");
    m.putAll(extra);
    String[] lines = new String[4];
    for (int i = 0; i < lines.length; i++) {
      lines[i] = JobTestSupport.json("d" + i, "summary", "Note " + i + ": " + String.join(" ", JobTestSupport.words(20)), null);
    }
    Path input = JobTestSupport.jsonl(dir, runId + ".jsonl", lines);
    return JobTestSupport.options(input, dir.resolve("out-" + runId), runId, m);
  }

  @Test
  @Order(1)
  void theShippedConfAsksForNoGpuAndFinishesOnExecutorsWithout() {
    for (String k : shipped.stringPropertyNames()) {
      assertFalse(k.contains(".resource.gpu."), "the shipped conf asks for a GPU: " + k);
      assertFalse(k.equals(RunOptions.Key.INFERENCE_GPU_AMOUNT.conf()), "the shipped conf asks for a GPU: " + k);
      assertFalse(k.equals(RunOptions.Key.MODEL.conf()), "the model path is cluster-specific: " + k);
    }
    RunSummary s = assertTimeoutPreemptively(Duration.ofMinutes(8), () -> LongSieveJob.run(spark, options("shipped", Map.of())));
    assertEquals(4L, s.byStatus().get(JobSchemas.OK), s.line());
    assertEquals(4, spark.read().parquet(dir.resolve("out-shipped").resolve("outputs").toString())
        .where(col("status").equalTo("ok")).count());
  }

  @Test
  @Order(2)
  void aStageGpuShareWithoutExecutorGpusIsRefusedNamingTheSettings() {
    RunOptions o = options("stagegpu", Map.of("spark.longsieve.inferenceGpuAmount", "0.25"));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> LongSieveJob.run(spark, o));
    assertTrue(e.getMessage().contains("spark.executor.resource.gpu.amount") && e.getMessage().contains("inferenceGpuAmount"),
        e.getMessage());
  }

  /**
   * Executors that ask for a GPU on workers without one never start, and Spark waits for them
   * forever; the watchdog fails the run within spark.longsieve.resourceWaitSeconds with one line.
   */
  @Test
  @Order(3)
  void aGpuAskOnAClusterWithoutGpusFailsWithinTheBoundNamingTheSetting() {
    spark.stop();
    spark = SparkSession.builder().master("local-cluster[1,1,1024]").appName("longsieve-no-gpu-test")
        .config("spark.ui.enabled", "false")
        .config("spark.executor.cores", "1").config("spark.executor.memory", "1024m")
        .config("spark.executor.resource.gpu.amount", "1")
        .config("spark.executor.resource.gpu.discoveryScript", System.getenv("SPARK_HOME") + "/fake-gpus.sh")
        .config("spark.task.resource.gpu.amount", "0.25")
        .config("spark.executor.extraClassPath", System.getProperty("java.class.path"))
        .config("spark.executor.extraJavaOptions", LocalCluster.executorFlags())
        .getOrCreate();
    RunOptions o = options("nogpu", Map.of("spark.longsieve.resourceWaitSeconds", "5"));
    long t0 = System.nanoTime();
    IllegalArgumentException e = assertTimeoutPreemptively(Duration.ofMinutes(3),
        () -> assertThrows(IllegalArgumentException.class, () -> LongSieveJob.run(spark, o)));
    double seconds = (System.nanoTime() - t0) / 1e9;
    String m = e.getMessage();
    assertTrue(m.contains("spark.longsieve.resourceWaitSeconds=5") && m.contains("0.25 gpu") && m.contains("no executor registered")
        && m.contains("spark.executor.resource.gpu.amount"), m);
    assertFalse(m.contains("\n"), "one line: " + m);
    assertTrue(seconds < 90, "failed after " + seconds + " s");
  }
}
