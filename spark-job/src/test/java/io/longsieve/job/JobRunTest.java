package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * The whole job through {@code longsieve run} on the tiny model: one input with a row of every
 * outcome, run once for the class; each test checks one promise about what it wrote.
 */
class JobRunTest {

  private static SparkSession spark;
  private static Path out;
  private static int exitCode;
  private static String printed;

  @TempDir
  static Path dir;

  /** Runs {@code longsieve run} with the test model; returns exit code, stdout and stderr. */
  private static String[] cli(String... args) {
    StringWriter so = new StringWriter();
    StringWriter se = new StringWriter();
    CommandLine cl = JobCli.commandLine();
    cl.setOut(new PrintWriter(so, true));
    cl.setErr(new PrintWriter(se, true));
    String[] common = {"run", "--model", JobTestSupport.MODEL.toString(), "--master", "local[2]",
        "--max-new-tokens", "4", "--device", "cpu", "--conf", "spark.longsieve.threads=1",
        "--conf", "spark.longsieve.maxContext=128"};
    String[] all = new String[common.length + args.length];
    System.arraycopy(common, 0, all, 0, common.length);
    System.arraycopy(args, 0, all, common.length, args.length);
    int rc = cl.execute(all);
    return new String[] {Integer.toString(rc), so.toString(), se.toString()};
  }

  @BeforeAll
  static void runTheJob() {
    spark = JobTestSupport.session();
    ExecutorEngine.closeAll(); // count this run's openings from zero
    Path input = JobTestSupport.jsonl(dir, "docs.jsonl",
        JobTestSupport.json("s1", "summary", "The council approved the winter budget for the harbour.", null),
        "{\"doc_id\":\"q1\",\"task\":\"qa\",\"text\":\"The school opened in 1998.\","
            + "\"question\":\"When did the school open?\",\"reference\":\"1998\"}",
        "{\"doc_id\":\"m1\",\"task\":\"multi_doc_qa\",\"documents\":[{\"title\":\"Farm\",\"text\":\"Cows graze.\"},"
            + "{\"title\":\"Bridge\",\"text\":\"The bridge is old.\"}],\"question\":\"What is old?\"}",
        "{\"task\":\"summary\",\"text\":\"A row without an id.\"}",
        "{this is not json",
        JobTestSupport.json("s1", "summary", "The same id again.", null),
        JobTestSupport.json("long", "summary", String.join(" ", JobTestSupport.words(400)), null));
    out = dir.resolve("out");
    String[] r = cli("--input", input.toString(), "--output", out.toString(), "--run-id", "e2e",
        "--conf", "spark.longsieve.partitions=3");
    exitCode = Integer.parseInt(r[0]);
    printed = r[1] + r[2];
  }

  @AfterAll
  static void stop() {
    spark.stop();
  }

  private static Dataset<Row> table(String name) {
    return spark.read().parquet(out.resolve(name).toString());
  }

  private static Map<String, Row> outputsById(String runId) {
    Map<String, Row> m = new TreeMap<>();
    for (Row r : table("outputs").where(col("run_id").equalTo(runId)).collectAsList()) {
      m.merge(r.getAs("doc_id") + (JobSchemas.DUPLICATE_ID.equals(r.getAs("status")) ? "#dup" : ""), r, (a, b) -> a);
    }
    return m;
  }

  @Test
  void theRunSucceedsAndPrintsAOneLineSummary() {
    assertEquals(0, exitCode, printed);
    assertTrue(printed.contains("longsieve run e2e: 7 rows (ok 4, bad_input 1, duplicate_id 1, too_long 1) in "),
        printed);
    assertTrue(printed.contains("docs/s") && printed.contains("output tokens/s"), printed);
  }

  @Test
  void everyInputRowHasExactlyOneOutputRowWithItsStatus() {
    assertEquals(7, table("outputs").where(col("run_id").equalTo("e2e")).count());
    Map<String, Row> rows = outputsById("e2e");
    assertEquals(JobSchemas.OK, rows.get("s1").getAs("status"));
    assertEquals(JobSchemas.OK, rows.get("q1").getAs("status"));
    assertEquals(JobSchemas.OK, rows.get("m1").getAs("status"));
    Row noId = rows.values().stream().filter(r -> "docs.jsonl:4".equals(r.getAs("source"))).findFirst().orElseThrow();
    assertEquals(JobSchemas.OK, noId.getAs("status"));
    assertTrue(((String) noId.getAs("doc_id")).startsWith(ContentId.PREFIX), "an id from the row's content");
    assertEquals(JobSchemas.BAD_INPUT, rows.get("docs.jsonl:5").getAs("status"));
    assertEquals(JobSchemas.DUPLICATE_ID, rows.get("s1#dup").getAs("status"));
    assertEquals(JobSchemas.TOO_LONG, rows.get("long").getAs("status"));
  }

  @Test
  void outputsHaveTheDocumentedColumns() {
    List<String> columns = Arrays.asList(table("outputs").columns());
    assertTrue(columns.containsAll(JobSchemas.OUTPUT_COLUMNS), columns.toString());
    Row q1 = outputsById("e2e").get("q1");
    assertEquals("1998", q1.getAs("reference"), "the reference passes through");
    assertTrue((int) q1.getAs("output_tokens") >= 1);
    assertTrue(List.of("eos", "length").contains((String) q1.getAs("finish_reason")));
  }

  @Test
  void statsHaveEveryEngineStatistic() {
    Dataset<Row> stats = table("stats").where(col("run_id").equalTo("e2e"));
    List<String> columns = Arrays.asList(stats.columns());
    assertTrue(columns.containsAll(JobSchemas.STATS_COLUMNS), columns.toString());
    assertEquals(new ArrayType(DataTypes.FloatType, true), stats.schema().apply("selected_fraction_by_layer").dataType());
    for (String c : JobSchemas.STATS_COLUMNS) {
      assertEquals(JobSchemas.STATS.apply(c).dataType().typeName(), stats.schema().apply(c).dataType().typeName(), c);
    }
    assertEquals(7, stats.count());
    Row s1 = stats.where(col("doc_id").equalTo("s1").and(col("status").equalTo("ok"))).first();
    assertEquals("cpu", s1.getAs("backend"));
    assertEquals("dense", s1.getAs("policy"));
    assertTrue((double) s1.getAs("ttft_ms") > 0);
    assertTrue((double) s1.getAs("total_ms") >= (double) s1.getAs("ttft_ms"));
    Double batch = s1.getAs("decode_batch_mean"); // null only without decode steps
    assertTrue((int) s1.getAs("output_tokens") <= 1 ? batch == null : batch >= 1, "documents per decode step: " + s1);
    assertEquals("driver", s1.getAs("executor_id"), "local mode runs tasks in the driver's executor");
  }

  @Test
  void theManifestRecordsInputOptionsVersionsCountsAndTimes() throws IOException {
    JsonNode m = new ObjectMapper().readTree(out.resolve("runs/e2e.json").toFile());
    assertEquals("e2e", m.path("run_id").asText());
    assertTrue(m.path("input").asText().endsWith("docs.jsonl"));
    assertEquals("jsonl", m.path("input_format").asText());
    assertEquals(4, m.path("counts").path("ok").asInt());
    assertEquals(1, m.path("counts").path("too_long").asInt());
    assertEquals(0, m.path("counts").path("engine_error").asInt());
    assertEquals("4", m.path("options").path("spark.longsieve.maxNewTokens").asText());
    assertEquals("4.1.3", m.path("versions").path("spark").asText());
    assertTrue(m.path("versions").path("java").asText().startsWith("17"));
    assertTrue(m.path("versions").has("longsieve"));
    assertEquals("cpu", m.path("backend").asText());
    assertTrue(m.path("start").asText().compareTo(m.path("end").asText()) < 0);
    assertTrue(Files.notExists(out.resolve("_staging").resolve("e2e")), "the staging copy is gone");
  }

  @Test
  void theEngineIsOpenedOncePerJvmAcrossPartitionsAndTasks() {
    long partitionsWithEngine = table("stats").where(col("run_id").equalTo("e2e").and(col("backend").isNotNull()))
        .select("partition_id").distinct().count();
    assertTrue(partitionsWithEngine >= 2, "several tasks used the engine: " + partitionsWithEngine);
    assertEquals(1, ExecutorEngine.openings());
    long generated = table("stats").where(col("run_id").equalTo("e2e").and(col("status").equalTo(JobSchemas.OK)))
        .count();
    var counters = ExecutorEngine.counters();
    assertEquals(1, counters.size());
    assertTrue(counters.get(0).requests() >= generated,
        "the tasks' requests all went through the one engine's scheduler: " + counters.get(0));
  }

  @Test
  void aUsedRunIdIsRefusedAndANewRunOfParquetInputWithAnotherPolicyAccumulates() {
    String[] again = cli("--input", dir.resolve("docs.jsonl").toString(), "--output", out.toString(),
        "--run-id", "e2e");
    assertEquals("2", again[0]);
    assertTrue(again[2].contains("run id 'e2e' was already used under"), again[2]);

    // the second run reads Parquet, so that path is covered end to end too
    Path small = dir.resolve("one.parquet");
    spark.read().json(JobTestSupport.jsonl(dir, "one.jsonl", JobTestSupport.json("z", "summary", "One more.", null))
        .toString()).write().parquet(small.toString());
    String[] second = cli("--input", small.toString(), "--output", out.toString(), "--run-id", "e2e_2",
        "--policy", "tokenselect");
    assertEquals("0", second[0], second[2]);
    Row z = table("outputs").where(col("run_id").equalTo("e2e_2")).first();
    assertEquals("z", z.getAs("doc_id"));
    assertEquals(JobSchemas.OK, z.getAs("status"));
    assertEquals(1, table("outputs").where(col("run_id").equalTo("e2e_2")).count());
    assertEquals(7, table("outputs").where(col("run_id").equalTo("e2e")).count(), "the first run is untouched");
    String policy = table("stats").where(col("run_id").equalTo("e2e_2")).first().getAs("policy");
    assertTrue(policy.contains("tokenselect"), policy);
    assertEquals(1, ExecutorEngine.openings(), "the second run, another policy, reuses the engine");
  }

  @Test
  void aRunWithATemplateAndSamplingWritesTheSettingsUsedToTheStatsTable() throws IOException {
    Path template = Files.writeString(dir.resolve("template.txt"), "Question: {question}\nNotes: {text}\nAnswer:");
    Path input = JobTestSupport.jsonl(dir, "templated.jsonl",
        "{\"doc_id\":\"a\",\"text\":\"The mill burned in 1901.\",\"question\":\"When did the mill burn?\"}",
        "{\"doc_id\":\"b\",\"prompt\":\"Name a {kind}.\",\"kind\":\"river\",\"temperature\":0,\"stop\":\".\"}",
        "{\"doc_id\":\"c\",\"text\":\"No question here.\"}");
    String[] r = cli("--input", input.toString(), "--output", out.toString(), "--run-id", "tpl",
        "--prompt-template", template.toString(), "--temperature", "0.9", "--top-p", "0.8", "--seed", "5", "--stop", "\n\n");
    assertEquals("0", r[0], r[2]);
    Map<String, Row> stats = new TreeMap<>();
    for (Row s : table("stats").where(col("run_id").equalTo("tpl")).collectAsList()) stats.put(s.getAs("doc_id"), s);
    Row a = stats.get("a");
    assertEquals(JobSchemas.OK, a.getAs("status"));
    assertEquals("run", a.getAs("prompt_source"));
    assertEquals(0.9, a.<Double>getAs("temperature"));
    assertEquals(0.8, a.<Double>getAs("top_p"));
    assertEquals(5L, a.<Long>getAs("seed"));
    assertEquals(4, (int) a.getAs("max_new_tokens"));
    assertEquals(List.of("\n\n"), a.getList(a.fieldIndex("stop")));
    Row b = stats.get("b");
    assertEquals("row", b.getAs("prompt_source"));
    assertEquals(0.0, b.<Double>getAs("temperature"), "the row's value wins");
    assertEquals(List.of("."), b.getList(b.fieldIndex("stop")));
    assertEquals(JobSchemas.BAD_INPUT, stats.get("c").getAs("status"));
    assertTrue(outputsById("tpl").get("c").<String>getAs("error").startsWith("--prompt-template: the prompt template's {question}"));
  }
}
