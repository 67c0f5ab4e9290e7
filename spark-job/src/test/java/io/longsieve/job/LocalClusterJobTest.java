package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.ExecutorLostFailure;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The job on two executor JVMs (Spark local-cluster mode): failures that only a real cluster has,
 * a lost executor mid-stage, an out-of-memory document, malformed rows read by remote executors.
 * One cluster for the class; starting it costs about half a minute on a small machine.
 */
@Tag("cluster")
class LocalClusterJobTest {

  static SparkSession spark;

  @TempDir
  static Path dir;

  @BeforeAll
  static void start() {
    spark = LocalCluster.session(2);
  }

  @AfterAll
  static void stop() {
    spark.stop();
  }

  static RunOptions options(Path input, String runId, Map<String, String> extra) {
    Map<String, String> m = new HashMap<>(extra);
    m.put("spark.master", spark.sparkContext().master());
    return JobTestSupport.options(input, dir.resolve("out-" + runId), runId, m);
  }

  /** Every output row of a run, doc_id → status. */
  static Map<String, String> statuses(String runId) {
    Map<String, String> m = new HashMap<>();
    List<Row> rows = spark.read().parquet(dir.resolve("out-" + runId).resolve("outputs").toString())
        .where(col("run_id").equalTo(runId)).select("doc_id", "status").collectAsList();
    for (Row r : rows) assertTrue(m.put(r.getString(0), r.getString(1)) == null, "two rows for " + r.getString(0));
    return m;
  }

  static Path documents(String name, int n, int words) {
    String[] lines = new String[n];
    for (int i = 0; i < n; i++) {
      lines[i] = JobTestSupport.json("d" + i, "summary", "Document " + i + ": " + String.join(" ", JobTestSupport.words(words)), null);
    }
    return JobTestSupport.jsonl(dir, name, lines);
  }

  @Test
  void theSqlFunctionsRunOnTheExecutorsEnginesAndAnswerAsTheEngineDoesLocally() {
    LongSieveSqlTest.configure(spark);
    try {
      LongSieveSql.register(spark);
      LongSieveSqlTest.docs(spark);
      List<Row> rows = spark.sql("SELECT doc_id, r.output, r.status FROM (SELECT doc_id, longsieve_result(text, map()) AS r"
          + " FROM docs) WHERE doc_id LIKE 'p%' ORDER BY doc_id").collectAsList();
      assertEquals(LongSieveSqlTest.PROMPTS.size(), rows.size());
      for (int i = 0; i < rows.size(); i++) {
        assertEquals("ok", rows.get(i).getString(2), rows.get(i).toString());
        // the executors' engines (other JVMs) against this JVM's engine on the same prompt
        assertEquals(LongSieveSqlTest.direct(LongSieveSqlTest.PROMPTS.get(i), 4), rows.get(i).getString(1));
      }
    } finally {
      for (String k : List.of("model", "device", "threads", "maxNewTokens")) spark.conf().unset("spark.longsieve." + k);
    }
  }

  @Test
  void theDataFrameApiRunsOnTheExecutorsEnginesAndGivesTheCliJobsRows() {
    Path input = sampledDocuments("api.jsonl", 6, 30);
    LongSieveJob.run(spark, options(input, "apicli", Map.of("spark.longsieve.partitions", "3")));
    Map<String, String> cli = new HashMap<>();
    for (Row r : spark.read().parquet(dir.resolve("out-apicli").resolve("outputs").toString()).select("doc_id", "output")
        .collectAsList()) {
      cli.put(r.getString(0), r.getString(1));
    }
    LongSieveOptions o = LongSieveOptions.builder().model(JobTestSupport.MODEL.toString()).device("cpu").threads(1)
        .maxNewTokens(4).partitions(3).build();
    List<Row> api = LongSieve.generate(spark.read().json(input.toString()), o)
        .select("doc_id", "status", "output", "executor_id").collectAsList();
    assertEquals(6, api.size());
    for (Row r : api) {
      assertEquals("ok", r.getString(1), r.toString());
      assertEquals(cli.get(r.getString(0)), r.getString(2), "the API's output is the CLI job's: " + r);
      assertTrue(!r.getString(3).equals("driver"), "generated on an executor: " + r);
    }
  }

  /** Documents sampled at temperature 1, each with its own seed (the row's seed wins over the run's). */
  static Path sampledDocuments(String name, int n, int words) {
    String[] lines = new String[n];
    for (int i = 0; i < n; i++) {
      lines[i] = "{\"doc_id\":\"d" + i + "\",\"task\":\"summary\",\"text\":\"Document " + i + ": "
          + String.join(" ", JobTestSupport.words(words)) + "\",\"temperature\":1.0,\"top_p\":0.95,\"seed\":" + (1000 + i) + "}";
    }
    return JobTestSupport.jsonl(dir, name, lines);
  }

  @Test
  void killingAnExecutorMidStageLosesNoDocumentAndWritesNoneTwice() throws IOException {
    Path input = sampledDocuments("kill.jsonl", 32, 100);
    ExecutorKiller killer = new ExecutorKiller(spark);
    spark.sparkContext().addSparkListener(killer);
    try {
      LongSieveJob.run(spark, options(input, "kill", Map.of("spark.longsieve.partitions", "8",
          "spark.longsieve.maxNewTokens", "16", "spark.longsieve.slices", "1")));
    } finally {
      spark.sparkContext().removeSparkListener(killer);
    }
    assertTrue(killer.killed.get() > 0, "an executor JVM was killed during the generation stage");
    assertTrue(killer.lostTasks.get() > 0, "a generation task was running on it and was retried");
    Map<String, String> st = statuses("kill");
    assertEquals(32, st.size());
    assertTrue(st.values().stream().allMatch("ok"::equals), st.toString());
    sampledOutputsAreTheSameWhereverTheyRan(input, "kill");
  }

  /**
   * Each seeded sampled row's output, written by whichever attempt committed it (the killed
   * executor's tasks ran again elsewhere), equals this JVM's run of the same row with the same seed;
   * and sampling did change some output against greedy, so the seed is what makes them equal.
   */
  private static void sampledOutputsAreTheSameWhereverTheyRan(Path input, String runId) throws IOException {
    RunOptions o = options(input, runId, Map.of("spark.longsieve.maxNewTokens", "16"));
    DocumentProcessor here = new DocumentProcessor(o.engineSpec(), runId, 16, o.policy(), false, o.generation());
    Map<String, Row> written = new HashMap<>();
    for (Row r : spark.read().parquet(dir.resolve("out-" + runId).resolve("stats").toString())
        .where(col("run_id").equalTo(runId)).select("doc_id", "temperature", "seed").collectAsList()) {
      written.put(r.getString(0), r);
    }
    Map<String, String> outputs = new HashMap<>();
    for (Row r : spark.read().parquet(dir.resolve("out-" + runId).resolve("outputs").toString())
        .where(col("run_id").equalTo(runId)).select("doc_id", "output").collectAsList()) {
      outputs.put(r.getString(0), r.getString(1));
    }
    int differFromGreedy = 0;
    List<String> lines = Files.readAllLines(input);
    for (int i = 0; i < lines.size(); i++) {
      Row parsed = DocumentParser.parse(lines.get(i), true, "kill.jsonl", "file:/kill.jsonl", i + 1).get(0);
      String id = parsed.getAs("doc_id");
      assertEquals(1.0, written.get(id).getDouble(1), "the stats row records the temperature used");
      assertEquals(1000L + i, written.get(id).getLong(2), "and the row's seed");
      assertEquals(here.process(parsed, "driver", 0).<String>getAs("output"), outputs.get(id), id);
      Row greedy = DocumentParser.parse(lines.get(i).replace("\"temperature\":1.0", "\"temperature\":0"), true,
          "kill.jsonl", "file:/kill.jsonl", i + 1).get(0);
      if (!outputs.get(id).equals(here.process(greedy, "driver", 0).getAs("output"))) differFromGreedy++;
    }
    assertTrue(differFromGreedy > 0, "sampling changed some outputs against greedy");
  }

  @Test
  void onlyTheGenerationStageClaimsAGpuShareAndItsTasksBindTheAssignedGpu() {
    Path input = documents("gpu.jsonl", 6, 20);
    Map<Integer, Integer> profileOfStage = new ConcurrentHashMap<>();
    SparkListener stages = new SparkListener() {
      @Override
      public void onStageSubmitted(org.apache.spark.scheduler.SparkListenerStageSubmitted s) {
        profileOfStage.put(s.stageInfo().stageId(), s.stageInfo().resourceProfileId());
      }
    };
    ExecutorKiller generation = new ExecutorKiller(spark); // used only to learn the generation stage's id
    generation.killed.set(-1);
    spark.sparkContext().addSparkListener(stages);
    spark.sparkContext().addSparkListener(generation);
    try {
      // device auto: the task's GPU address is bound (GpuBinding), CUDA is unusable here, so the engine runs on CPU
      LongSieveJob.run(spark, options(input, "gpu", Map.of("spark.longsieve.inferenceGpuAmount", "0.5",
          "spark.longsieve.device", "auto", "spark.longsieve.partitions", "2")));
    } finally {
      spark.sparkContext().removeSparkListener(stages);
      spark.sparkContext().removeSparkListener(generation);
    }
    Map<String, String> st = statuses("gpu");
    assertEquals(6, st.size());
    assertTrue(st.values().stream().allMatch("ok"::equals), st.toString());
    int genProfile = profileOfStage.get(generation.resultStage);
    assertTrue(genProfile != 0, "the generation stage runs under its task resource profile");
    long others = profileOfStage.entrySet().stream().filter(e -> e.getKey() != generation.resultStage)
        .filter(e -> e.getValue() != 0).count();
    assertEquals(0, others, "every other stage keeps the default profile: " + profileOfStage);
  }

  /** One run over an input with a row of every failure kind and an injected out-of-memory document. */
  static void runFailures() throws IOException {
    if (Files.exists(dir.resolve("out-bad"))) return;
    Path input = dir.resolve("bad.jsonl");
    List<byte[]> lines = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      lines.add(JobTestSupport.json("d" + i, "summary", "Report " + i + " on the bridge.", null).getBytes(StandardCharsets.UTF_8));
    }
    lines.add("{not json at all".getBytes(StandardCharsets.UTF_8));
    lines.add("{\"doc_id\":\"notext\",\"task\":\"summary\"}".getBytes(StandardCharsets.UTF_8));
    lines.add("{\"doc_id\":\"badtask\",\"task\":\"translate\",\"text\":\"Hello.\"}".getBytes(StandardCharsets.UTF_8));
    lines.add("{\"doc_id\":\"noquestion\",\"task\":\"qa\",\"text\":\"Hello.\"}".getBytes(StandardCharsets.UTF_8));
    lines.add(JobTestSupport.json("d0", "summary", "Same id again.", null).getBytes(StandardCharsets.UTF_8));
    lines.add(JobTestSupport.json("long", "summary", String.join(" ", JobTestSupport.words(400)), null)
        .getBytes(StandardCharsets.UTF_8));
    lines.add("{\"doc_id\":\"latin1\",\"task\":\"summary\",\"text\":\"caf\u00e9\"}".getBytes(StandardCharsets.ISO_8859_1));
    try (var out = Files.newOutputStream(input)) {
      for (byte[] l : lines) {
        out.write(l);
        out.write('\n');
      }
    }
    SparkListener removals = new SparkListener() {
      @Override
      public void onExecutorRemoved(SparkListenerExecutorRemoved removed) {
        REMOVED.add(removed.reason());
      }
    };
    spark.sparkContext().addSparkListener(removals);
    try {
      LongSieveJob.run(spark, options(input, "bad", Map.of("spark.longsieve.maxContext", "128",
          "spark.longsieve.test.injectOomDocId", "d5", "spark.longsieve.partitions", "3",
          "spark.longsieve.test.injectStickyCudaError", "d2@" + dir.resolve("sticky.marker"))));
    } finally {
      spark.sparkContext().removeSparkListener(removals);
    }
  }

  /** Why executors were removed during the failures run. */
  static final List<String> REMOVED = new java.util.concurrent.CopyOnWriteArrayList<>();

  @Test
  void aStickyCudaErrorEndsTheExecutorWithCode45AndItsTaskIsRetriedElsewhere() throws IOException {
    runFailures();
    assertTrue(Files.exists(dir.resolve("sticky.marker")), "the sticky error was injected");
    assertTrue(REMOVED.stream().anyMatch(r -> r.contains("exited with code " + DocumentAttempts.STICKY_CUDA_EXIT_CODE)),
        "an executor exited with code 45: " + REMOVED);
    Row d2 = spark.read().parquet(dir.resolve("out-bad").resolve("outputs").toString())
        .where(col("doc_id").equalTo("d2")).select("status").first();
    assertEquals("ok", d2.getString(0), "the retried task ran d2 on a fresh executor");
  }

  @Test
  void anOutOfMemoryDocumentIsRetriedThenGetsAnOomRowAndTheOthersAreOk() throws IOException {
    runFailures();
    Map<String, String> st = new HashMap<>();
    for (Row r : spark.read().parquet(dir.resolve("out-bad").resolve("outputs").toString())
        .where(col("doc_id").startsWith("d").and(col("status").notEqual("duplicate_id")))
        .select("doc_id", "status").collectAsList()) {
      st.put(r.getString(0), r.getString(1));
    }
    assertEquals(Map.of("d0", "ok", "d1", "ok", "d2", "ok", "d3", "ok", "d4", "ok", "d5", "oom"), st);
    Row err = spark.read().parquet(dir.resolve("out-bad").resolve("outputs").toString())
        .where(col("doc_id").equalTo("d5")).select("error").first();
    assertTrue(err.getString(0).contains("prefill chunks 2048, 512, 128"), err.getString(0));
  }

  @Test
  void malformedInputsOfEveryKindGetTheirStatusesOnRemoteExecutors() throws IOException {
    runFailures();
    Map<String, String> byId = new HashMap<>();
    Map<String, Integer> counts = new HashMap<>();
    for (Row r : spark.read().parquet(dir.resolve("out-bad").resolve("outputs").toString())
        .select("doc_id", "status").collectAsList()) {
      byId.merge(r.getString(0), r.getString(1), (a, b) -> a + "," + b);
      counts.merge(r.getString(1), 1, Integer::sum);
    }
    assertEquals("bad_input", byId.get("notext"));
    assertEquals("bad_input", byId.get("badtask"));
    assertEquals("bad_input", byId.get("noquestion"));
    assertEquals("too_long", byId.get("long"));
    assertTrue(Set.of("ok,duplicate_id", "duplicate_id,ok").contains(byId.get("d0")), byId.get("d0"));
    assertEquals(Map.of("ok", 5, "oom", 1, "duplicate_id", 1, "too_long", 1, "bad_input", 5), counts,
        "unparseable JSON and invalid UTF-8 are bad_input rows with generated ids: " + byId);
  }

  /**
   * Kills one executor JVM (SIGKILL) when the first task of the generation job's result stage ends,
   * choosing an executor that is running another task of that stage at that moment.
   */
  static final class ExecutorKiller extends SparkListener {
    final SparkSession spark;
    volatile int resultStage = -1;
    final Map<Long, String> running = new ConcurrentHashMap<>(); // taskId → executorId, result stage only
    final AtomicLong killed = new AtomicLong();
    final AtomicInteger lostTasks = new AtomicInteger();

    ExecutorKiller(SparkSession spark) {
      this.spark = spark;
    }

    @Override
    public void onJobStart(SparkListenerJobStart job) {
      String d = job.properties() == null ? null : job.properties().getProperty("spark.job.description");
      if (d != null && d.contains(": generate")) {
        // the result stage is created after its parents, so it has the highest id
        for (Object s : CollectionConverters.asJava(job.stageIds())) resultStage = Math.max(resultStage, (Integer) s);
      }
    }

    @Override
    public void onTaskStart(org.apache.spark.scheduler.SparkListenerTaskStart start) {
      if (start.stageId() == resultStage) running.put(start.taskInfo().taskId(), start.taskInfo().executorId());
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd end) {
      if (end.stageId() != resultStage) return;
      running.remove(end.taskInfo().taskId());
      if (end.reason() instanceof ExecutorLostFailure) lostTasks.incrementAndGet();
      if (killed.get() != 0) return;
      for (String executor : running.values()) {
        for (Long pid : LocalCluster.executorPids(spark)) {
          if (LocalCluster.commandLine(pid).contains("--executor-id " + executor + " ")) {
            ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
            killed.set(pid);
            return;
          }
        }
      }
    }
  }
}
