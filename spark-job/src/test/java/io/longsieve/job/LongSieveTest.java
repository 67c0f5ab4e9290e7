package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;

/** The DataFrame API in local mode: the CLI job's rows for the same documents, and its failure semantics. */
class LongSieveTest extends SparkSessionTest {

  private static final StructType SCHEMA = new StructType()
      .add("doc_id", DataTypes.StringType).add("task", DataTypes.StringType).add("text", DataTypes.StringType)
      .add("question", DataTypes.StringType).add("prompt", DataTypes.StringType).add("lang", DataTypes.StringType)
      .add("temperature", DataTypes.DoubleType).add("seed", DataTypes.LongType);

  /** Rows of every kind: two tasks, a row's own template, a sampled row, and three bad ones. */
  private static final List<Row> ROWS = List.of(
      RowFactory.create("q1", "qa", "The bridge opened in May.", "When did the bridge open?", null, null, null, null),
      RowFactory.create("s1", "summary", "The council met about the budget.", null, null, null, null, null),
      RowFactory.create("t1", null, "Hallo Welt", null, "Translate to {lang}: {text}", "French", null, null),
      RowFactory.create("r1", "summary", "Winter came to the harbour.", null, null, null, 1.2, 7L),
      RowFactory.create("nolang", null, "Hallo", null, "Translate to {lang}: {text}", null, null, null),
      RowFactory.create("notask", null, "Some text.", null, null, null, null, null),
      RowFactory.create("q1", "qa", "Again.", "Why?", null, null, null, null));

  private static LongSieveOptions.Builder options() {
    return LongSieveOptions.builder().model(JobTestSupport.MODEL.toString()).device("cpu").threads(1).maxNewTokens(4);
  }

  private static Map<String, Row> byId(Dataset<Row> d) {
    Map<String, Row> m = new HashMap<>();
    for (Row r : d.collectAsList()) assertTrue(m.put(r.getAs("doc_id"), r) == null || r.getAs("doc_id").equals("q1"));
    return m;
  }

  @Test
  void eachRowGetsItsResultAsTheCliJobGivesIt() {
    Dataset<Row> docs = spark.createDataFrame(ROWS, SCHEMA).repartition(2);
    Dataset<Row> out = LongSieve.generate(docs, options().runId("api1").build()).persist();
    assertEquals(JobSchemas.RESULT, out.schema(), "the outputs' and the stats' columns together");
    assertEquals(ROWS.size(), out.count(), "one row per input row, bad ones included");
    Map<String, String> status = new HashMap<>();
    for (Row r : out.where(col("status").notEqual(JobSchemas.DUPLICATE_ID)).collectAsList()) {
      status.put(r.getAs("doc_id"), r.getAs("status"));
    }
    assertEquals(Map.of("q1", "ok", "s1", "ok", "t1", "ok", "r1", "ok", "nolang", "bad_input", "notask", "bad_input"), status);
    assertEquals(1, out.where(col("status").equalTo(JobSchemas.DUPLICATE_ID)).count());
    Row nolang = out.where(col("doc_id").equalTo("nolang")).first();
    assertTrue(nolang.<String>getAs("error").contains("{lang} has no value"), nolang.<String>getAs("error"));
    Row sampled = out.where(col("doc_id").equalTo("r1")).first();
    assertEquals(1.2, sampled.<Double>getAs("temperature"));
    assertEquals(7L, sampled.<Long>getAs("seed"));
    assertEquals("row", out.where(col("doc_id").equalTo("t1")).first().getAs("prompt_source"));
    assertEquals("api1", sampled.getAs("run_id"));

    // the CLI job over the same rows as JSONL: the same outputs
    Dataset<Row> asJson = spark.createDataFrame(ROWS, SCHEMA).toJSON().toDF();
    java.nio.file.Path input = dir.resolve("same.jsonl");
    String[] lines = asJson.collectAsList().stream().map(r -> r.getString(0)).toArray(String[]::new);
    JobTestSupport.jsonl(dir, "same.jsonl", lines);
    LongSieveJob.run(spark, JobTestSupport.options(input, dir.resolve("cli"), "cli1", Map.of()));
    Dataset<Row> cli = spark.read().parquet(dir.resolve("cli").resolve("outputs").toString());
    for (Row c : cli.where(col("status").equalTo("ok")).collectAsList()) {
      Row a = out.where(col("doc_id").equalTo(c.<String>getAs("doc_id")).and(col("status").equalTo("ok"))).first();
      assertEquals(c.<String>getAs("output"), a.getAs("output"), c.<String>getAs("doc_id"));
    }
    assertEquals(4, cli.where(col("status").equalTo("ok")).count());
    out.unpersist();
  }

  @Test
  void aRunTemplateNamingNoColumnIsRefusedBeforeAnyJob() {
    Dataset<Row> docs = spark.createDataFrame(ROWS, SCHEMA);
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> LongSieve.generate(docs, options().promptTemplate("Answer {query} from {text}").build()));
    assertTrue(e.getMessage().startsWith("the prompt template's {query} is not a column of the DataFrame"), e.getMessage());
  }

  @Test
  void aRunTemplateAndSamplingFromTheOptionsApplyToRowsWithoutTheirOwn() {
    Dataset<Row> docs = spark.createDataFrame(List.of(ROWS.get(0), ROWS.get(2)), SCHEMA);
    Dataset<Row> out = LongSieve.generate(docs, Map.of("model", JobTestSupport.MODEL.toString(), "device", "cpu",
        "threads", "1", "maxNewTokens", "3", "promptTemplate", "Q: {question}\n{text}", "temperature", "0.9", "seed", "3"));
    Map<String, Row> rows = byId(out);
    assertEquals("run", rows.get("q1").getAs("prompt_source"));
    assertEquals("row", rows.get("t1").getAs("prompt_source"), "the row's own prompt wins");
    assertEquals(0.9, rows.get("q1").<Double>getAs("temperature"));
    assertEquals(3L, rows.get("q1").<Long>getAs("seed"));
    assertEquals(3, (int) rows.get("q1").getAs("max_new_tokens"));
  }

  @Test
  void optionsRefuseUnknownKeysFileRunKeysAndSparkSettings() {
    assertTrue(assertThrows(IllegalArgumentException.class, () -> LongSieveOptions.fromMap(Map.of("colour", "red")))
        .getMessage().startsWith("unknown option 'spark.longsieve.colour'; known keys:"));
    assertEquals("'spark.longsieve.input' applies to longsieve run over files, not to rows from a DataFrame or a query",
        assertThrows(IllegalArgumentException.class, () -> LongSieveOptions.fromMap(Map.of("input", "x"))).getMessage());
    assertTrue(assertThrows(IllegalArgumentException.class,
        () -> LongSieveOptions.fromMap(Map.of("spark.sql.shuffle.partitions", "4"))).getMessage().contains("Spark setting"));
    assertEquals("spark.longsieve.temperature must be >= 0, not -1.0",
        assertThrows(IllegalArgumentException.class, () -> options().temperature(-1).build()).getMessage());
    LongSieveOptions o = options().policy("tokenselect").stop("\n", "END").topP(0.5).build();
    assertEquals("tokenselect", o.policy().canonical().split(":")[0]);
    assertEquals(List.of("\n", "END"), o.generation().stop());
    assertEquals(0.5, o.generation().topP());
    assertEquals(o, LongSieveOptions.fromMap(Map.of("model", JobTestSupport.MODEL.toString(), "device", "cpu",
        "threads", "1", "maxNewTokens", "4", "policy", "tokenselect", "stop", "[\"\\n\",\"END\"]", "topP", "0.5",
        "runId", o.runId())), "the builder and the map give the same record");
  }

  @Test
  void aMessagesColumnIsAConversationPerRow() {
    StructType schema = new StructType().add("doc_id", DataTypes.StringType)
        .add("messages", DataTypes.createArrayType(JobSchemas.MESSAGE));
    List<Row> rows = List.of(
        RowFactory.create("c1", JobSchemas.seq(List.of(RowFactory.create("user", "Where is the river?")))),
        RowFactory.create("c2", JobSchemas.seq(List.of(RowFactory.create("assistant", "Hello.")))));
    Map<String, Row> out = byId(LongSieve.generate(spark.createDataFrame(rows, schema), options().build()));
    assertEquals("ok", out.get("c1").getAs("status"), out.get("c1").<String>getAs("error"));
    assertEquals("messages", out.get("c1").getAs("prompt_source"));
    assertEquals("bad_input", out.get("c2").getAs("status"));
    assertEquals("the last of 'messages' must be the user's (the model answers it)", out.get("c2").getAs("error"));
  }
}
