package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.structured.OutputSchema;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;

/**
 * Structured output through the job, judged by the networknt validator: a 40-row run with a nested
 * run-level schema (greedy and temperature 1.0 rows) whose every ok output validates and whose typed
 * {@code answer} column holds the parsed values, kept by a --resume run; per-row schemas next to free
 * rows, a bad row schema as bad_input naming the keyword, a cut document as json_incomplete; bad
 * run-level schemas refused before Spark starts.
 */
class StructuredOutputJobTest extends SparkSessionTest {

  static final String NESTED = """
      {"type": "object", "additionalProperties": false, "required": ["party", "amount", "lines"],
       "properties": {
         "party": {"type": "string", "minLength": 1, "maxLength": 8},
         "amount": {"type": "number", "minimum": 0, "maximum": 5000},
         "currency": {"enum": ["EUR", "USD"]},
         "lines": {"type": "array", "maxItems": 2, "items": {"type": "object", "required": ["n"],
           "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 99}, "paid": {"type": ["boolean", "null"]}}}}}}""";

  static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void everyRowValidatesTheTypedColumnHoldsThemAndResumeKeepsIt() throws IOException {
    String[] lines = new String[40]; // the 200-row run is StructuredGenerationTest's, batched 8 wide in one engine
    for (int i = 0; i < lines.length; i++) {
      lines[i] = "{\"doc_id\":\"c" + i + "\",\"task\":\"summary\",\"text\":\"Contract " + i + " between parties.\""
          + (i % 2 == 0 ? ",\"temperature\":1.0,\"seed\":" + i : "") + "}";
    }
    Path in = JobTestSupport.jsonl(dir, "contracts.jsonl", lines);
    Path schemaFile = dir.resolve("schema.json");
    Files.writeString(schemaFile, NESTED);
    Path out = dir.resolve("out-typed");
    Map<String, String> typed = Map.of("spark.longsieve.jsonSchemaFile", schemaFile.toString(),
        "spark.longsieve.typedOutput", "true", "spark.longsieve.maxNewTokens", "300");
    RunSummary first = LongSieveJob.run(spark, JobTestSupport.options(in, out, "first",
        merge(typed, Map.of("spark.longsieve.maxDocs", "30"))));
    assertEquals(30L, first.byStatus().get(JobSchemas.OK), first.line());
    RunSummary rest = LongSieveJob.run(spark, JobTestSupport.options(in, out, "rest",
        merge(typed, Map.of("spark.longsieve.resume", "true"))));
    assertEquals(10L, rest.byStatus().get(JobSchemas.OK), rest.line());

    Dataset<Row> outputs = spark.read().parquet(out.resolve("outputs").toString()).where(col("status").equalTo("ok"));
    assertEquals(AnswerColumn.sparkType(OutputSchema.parse(NESTED)), outputs.schema().apply("answer").dataType());
    SchemaJudge oracle = new SchemaJudge(NESTED);
    List<Row> rows = outputs.select("doc_id", "output", "finish_reason", "answer", "run_id").collectAsList();
    assertEquals(40, rows.size());
    for (Row r : rows) {
      String text = r.getString(1);
      assertEquals("json_complete", r.getString(2), r.getString(0));
      assertTrue(oracle.errors(text).isEmpty(), r.getString(0) + ": " + oracle.errors(text) + " in " + text);
      JsonNode doc = JSON.readTree(text);
      Row answer = r.getStruct(3);
      assertNotNull(answer, r.getString(0) + " (run " + r.getString(4) + ") has no typed answer");
      assertEquals(doc.get("party").asText(), answer.getAs("party"));
      assertEquals(doc.get("amount").asDouble(), (double) answer.getAs("amount"), 0);
      assertEquals(doc.get("lines").size(), answer.<scala.collection.Seq<Row>>getAs("lines").size());
      if (doc.get("lines").size() > 0) {
        assertEquals(doc.get("lines").get(0).get("n").asLong(), (long) answer.<scala.collection.Seq<Row>>getAs("lines").apply(0).getAs("n"));
      }
    }
    String report = Files.readString(out.resolve("report").resolve("rest.html"));
    assertTrue(report.contains("Structured output") && report.contains("100.0%"), "the report's structured section");
  }

  @Test
  void rowSchemasMixWithFreeRowsBadOnesAreBadInputAndCutOnesIncomplete() {
    String small = "{\\\"type\\\":\\\"array\\\",\\\"items\\\":{\\\"type\\\":\\\"integer\\\",\\\"minimum\\\":0,\\\"maximum\\\":9},\\\"maxItems\\\":3}";
    Path in = JobTestSupport.jsonl(dir, "mixed.jsonl",
        "{\"doc_id\":\"s1\",\"task\":\"summary\",\"text\":\"One.\",\"json_schema\":\"" + small + "\"}",
        "{\"doc_id\":\"s2\",\"task\":\"summary\",\"text\":\"Two.\",\"json_schema\":\"" + small + "\",\"temperature\":1.0}",
        "{\"doc_id\":\"free\",\"task\":\"summary\",\"text\":\"Three.\",\"max_new_tokens\":8}",
        "{\"doc_id\":\"bad\",\"task\":\"summary\",\"text\":\"Four.\",\"json_schema\":\"{\\\"type\\\":\\\"string\\\",\\\"format\\\":\\\"date\\\"}\"}",
        "{\"doc_id\":\"cut\",\"task\":\"summary\",\"text\":\"Five.\",\"max_new_tokens\":2,\"json_schema\":\"" + small + "\"}");
    Path out = dir.resolve("out-mixed");
    LongSieveJob.run(spark, JobTestSupport.options(in, out, "mixed", Map.of("spark.longsieve.maxNewTokens", "60")));
    Map<String, Row> byId = new java.util.HashMap<>();
    for (Row r : spark.read().parquet(out.resolve("outputs").toString()).select("doc_id", "status", "error", "output",
        "finish_reason").collectAsList()) {
      byId.put(r.getString(0), r);
    }
    SchemaJudge oracle = new SchemaJudge(small.replace("\\\"", "\""));
    for (String id : List.of("s1", "s2")) {
      assertEquals("ok", byId.get(id).getString(1), id);
      assertTrue(oracle.valid(byId.get(id).getString(3)), id + ": " + byId.get(id).getString(3));
    }
    assertEquals("ok", byId.get("free").getString(1));
    assertEquals("bad_input", byId.get("bad").getString(1));
    assertTrue(byId.get("bad").getString(2).contains("'format'"), byId.get("bad").getString(2));
    assertEquals(JobSchemas.JSON_INCOMPLETE, byId.get("cut").getString(1));
    assertEquals("length", byId.get("cut").getString(4));
    assertNull(spark.read().parquet(out.resolve("outputs").toString()).schema().getFieldIndex("answer").getOrElse(() -> null));
  }

  @Test
  void badRunSchemasAreRefusedBeforeSparkStarts() {
    Path in = JobTestSupport.jsonl(dir, "one.jsonl", JobTestSupport.json("a", "summary", "x", null));
    Path out = dir.resolve("out-refused");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> JobTestSupport.options(in, out, "r",
        Map.of("spark.longsieve.jsonSchema", "{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":\"date\"}}}")));
    assertTrue(e.getMessage().contains("'format' at #/properties/d") && !e.getMessage().contains("\n"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> JobTestSupport.options(in, out, "r",
        Map.of("spark.longsieve.jsonSchema", "{\"type\":")));
    assertTrue(e.getMessage().contains("not valid JSON"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> JobTestSupport.options(in, out, "r",
        Map.of("spark.longsieve.typedOutput", "true")));
    assertTrue(e.getMessage().contains("--json-schema"), e.getMessage());
  }

  @Test
  void theDataFrameApiAndTheSqlFunctionTakeASchema() {
    String small = "{\"type\":\"object\",\"required\":[\"n\"],\"properties\":{\"n\":{\"type\":\"integer\","
        + "\"minimum\":0,\"maximum\":50},\"tag\":{\"enum\":[\"a\",\"b\"]}}}";
    SchemaJudge judge = new SchemaJudge(small);
    org.apache.spark.sql.types.StructType cols = new org.apache.spark.sql.types.StructType()
        .add("doc_id", org.apache.spark.sql.types.DataTypes.StringType).add("text", org.apache.spark.sql.types.DataTypes.StringType)
        .add("task", org.apache.spark.sql.types.DataTypes.StringType);
    Dataset<Row> docs = spark.createDataFrame(List.of(org.apache.spark.sql.RowFactory.create("a", "Alpha.", "summary"),
        org.apache.spark.sql.RowFactory.create("b", "Beta.", "summary")), cols);
    Dataset<Row> out = LongSieve.generate(docs, LongSieveOptions.builder().model(JobTestSupport.MODEL.toString()).device("cpu")
        .threads(1).maxNewTokens(120).jsonSchema(small).typedOutput(true).build());
    for (Row r : out.select("status", "output", "answer").collectAsList()) {
      assertEquals("ok", r.getString(0), r.getString(1));
      assertTrue(judge.valid(r.getString(1)), r.getString(1));
      assertEquals(jsonN(r.getString(1)), (long) r.getStruct(2).<Long>getAs("n"));
    }
    LongSieveSqlTest.configure(spark);
    spark.conf().set("spark.longsieve.maxNewTokens", "120");
    try {
      LongSieveSql.register(spark);
      docs.createOrReplaceTempView("schema_docs");
      Row ok = spark.sql("SELECT longsieve_result(text, map('json_schema', '" + small + "')) FROM schema_docs WHERE doc_id = 'a'")
          .first().getStruct(0);
      assertEquals("ok", ok.getAs("status"), (String) ok.getAs("error"));
      assertTrue(judge.valid(ok.getAs("output")), (String) ok.getAs("output"));
      Row bad = spark.sql("SELECT longsieve_result(text, map('json_schema', '{\"type\":\"string\",\"format\":\"email\"}')) "
          + "FROM schema_docs WHERE doc_id = 'a'").first().getStruct(0);
      assertEquals("bad_input", bad.getAs("status"));
      assertTrue(((String) bad.getAs("error")).contains("'format'"), (String) bad.getAs("error"));
    } finally {
      spark.conf().unset("spark.longsieve.maxNewTokens");
    }
  }

  private static long jsonN(String text) {
    try {
      return JSON.readTree(text).get("n").asLong();
    } catch (IOException e) {
      throw new AssertionError(e);
    }
  }

  private static Map<String, String> merge(Map<String, String> a, Map<String, String> b) {
    Map<String, String> m = new java.util.LinkedHashMap<>(a);
    m.putAll(b);
    return m;
  }
}
