package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.engine.Engine;
import io.longsieve.engine.GenerationRequest;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The SQL functions in local mode: the engine's own answers, and every bad call a row, never a failed query. */
class LongSieveSqlTest extends SparkSessionTest {

  static final List<String> PROMPTS = List.of("What is the capital of France?", "Summarise: the cat sat on the mat.",
      "Count to five.");

  /** The settings a user puts on the session before registering: the test model on the CPU, 4 new tokens. */
  static void configure(SparkSession s) {
    s.conf().set("spark.longsieve.model", JobTestSupport.MODEL.toAbsolutePath().normalize().toString());
    s.conf().set("spark.longsieve.device", "cpu");
    s.conf().set("spark.longsieve.threads", "1");
    s.conf().set("spark.longsieve.maxNewTokens", "4");
  }

  /** A view `docs(doc_id, text)` of the prompts, a null one and an empty one. */
  static void docs(SparkSession s) {
    StructType schema = new StructType().add("doc_id", DataTypes.StringType).add("text", DataTypes.StringType);
    List<Row> rows = new java.util.ArrayList<>();
    for (int i = 0; i < PROMPTS.size(); i++) rows.add(RowFactory.create("p" + i, PROMPTS.get(i)));
    rows.add(RowFactory.create("null", null));
    rows.add(RowFactory.create("empty", " "));
    s.createDataFrame(rows, schema).repartition(2).createOrReplaceTempView("docs");
  }

  /** What the engine answers for a prompt given as a chat user message, asked directly. */
  static String direct(String prompt, int maxNewTokens) {
    RunOptions o = JobTestSupport.options(java.nio.file.Path.of("in"), java.nio.file.Path.of("out"), "x", Map.of());
    Engine e = ExecutorEngine.get(o.engineSpec());
    return e.generate(GenerationRequest.chat("direct", prompt, maxNewTokens).withPolicy(io.longsieve.policy.PolicySpec.DENSE)).text();
  }

  @BeforeEach
  void register() {
    configure(spark);
    LongSieveSql.register(spark);
    docs(spark);
  }

  @Test
  void selectGivesTheEnginesAnswerPerRowAndNullForAnEmptyPrompt() {
    Map<String, String> got = new java.util.HashMap<>();
    for (Row r : spark.sql("SELECT doc_id, longsieve_generate(text) FROM docs").collectAsList()) got.put(r.getString(0), r.getString(1));
    for (int i = 0; i < PROMPTS.size(); i++) {
      assertNotNull(got.get("p" + i));
      assertEquals(direct(PROMPTS.get(i), 4), got.get("p" + i), PROMPTS.get(i));
    }
    assertNull(got.get("null"));
    assertNull(got.get("empty"));
  }

  @Test
  void theResultStructCarriesStatusErrorAndStats() {
    List<Row> rows = spark.sql("SELECT doc_id, r.output, r.status, r.error, r.input_tokens, r.output_tokens, r.backend,"
        + " r.total_ms FROM (SELECT doc_id, longsieve_result(text, map()) AS r FROM docs) ORDER BY doc_id").collectAsList();
    assertEquals(5, rows.size());
    for (Row r : rows) {
      String id = r.getString(0);
      if (id.startsWith("p")) {
        assertEquals("ok", r.getString(2), r.toString());
        assertTrue(r.getInt(4) > 5 && r.getInt(5) >= 1 && r.getInt(5) <= 4, r.toString());
        assertEquals("cpu", r.getString(6));
        assertTrue(r.getDouble(7) > 0, r.toString());
      } else {
        assertNull(r.get(1));
        assertEquals("bad_input", r.getString(2), r.toString());
        assertEquals("the prompt is null or empty", r.getString(3));
      }
    }
  }

  @Test
  void optionsApplyPerCallAndABadOneIsABadInputRowNotAFailedQuery() {
    Row two = spark.sql("SELECT longsieve_result(text, map('max_new_tokens', '2')) FROM docs WHERE doc_id = 'p0'")
        .first().getStruct(0);
    assertEquals("ok", two.getAs("status"));
    assertTrue((Integer) two.getAs("output_tokens") <= 2, two.toString());
    assertEquals(direct(PROMPTS.get(0), 2), two.getAs("output"));
    assertEquals(direct(PROMPTS.get(0), 2),
        spark.sql("SELECT longsieve_generate_with(text, map('max_new_tokens', '2')) FROM docs WHERE doc_id = 'p0'")
            .first().getString(0));

    Row unknown = spark.sql("SELECT longsieve_result(text, map('colour', 'red')) FROM docs WHERE doc_id = 'p0'")
        .first().getStruct(0);
    assertEquals("bad_input", unknown.getAs("status"));
    assertEquals("unknown option 'colour'; known: " + LongSieveSql.OPTIONS, unknown.getAs("error"));
    Row badNumber = spark.sql("SELECT longsieve_result(text, map('max_new_tokens', 'many')) FROM docs WHERE doc_id = 'p0'")
        .first().getStruct(0);
    assertEquals("max_new_tokens must be an integer, not 'many'", badNumber.getAs("error"));
    Row badPolicy = spark.sql("SELECT longsieve_result(text, map('policy', 'magic')) FROM docs WHERE doc_id = 'p0'")
        .first().getStruct(0);
    assertEquals("bad_input", badPolicy.getAs("status"));
    Row sparse = spark.sql("SELECT longsieve_result(text, map('policy', 'tsa')) FROM docs WHERE doc_id = 'p0'")
        .first().getStruct(0);
    assertEquals("ok", sparse.getAs("status"));
    assertTrue(((String) sparse.getAs("policy")).startsWith("tsa"), sparse.toString());
  }

  @Test
  void aPromptOverTheContextIsATooLongRow() {
    String longPrompt = String.join(" ", JobTestSupport.words(5000));
    spark.createDataFrame(List.of(RowFactory.create("long", longPrompt)),
        new StructType().add("doc_id", DataTypes.StringType).add("text", DataTypes.StringType)).createOrReplaceTempView("long_docs");
    Row r = spark.sql("SELECT longsieve_result(text, map()) FROM long_docs").first().getStruct(0);
    assertEquals("too_long", r.getAs("status"), r.toString());
    assertTrue(((String) r.getAs("error")).contains("context limit"), r.toString());
    assertTrue((Integer) r.getAs("input_tokens") > 0, r.toString());
  }

  @Test
  void samplingOptionsApplyPerCallSeededAndABadValueIsABadInputRow() {
    String q = "SELECT longsieve_generate_with(text, map('max_new_tokens', '8', 'temperature', '1.5', 'seed', '%d')) FROM docs"
        + " WHERE doc_id = 'p1'";
    String a = spark.sql(String.format(q, 3)).first().getString(0);
    assertEquals(a, spark.sql(String.format(q, 3)).first().getString(0), "the same seed, the same answer");
    java.util.Set<String> answers = new java.util.HashSet<>();
    for (int seed = 0; seed < 6; seed++) answers.add(spark.sql(String.format(q, seed)).first().getString(0));
    assertTrue(answers.size() > 1, "the seed reaches the sampler: " + answers);
    Row bad = spark.sql("SELECT longsieve_result(text, map('temperature', '-1')) FROM docs WHERE doc_id = 'p0'")
        .first().getStruct(0);
    assertEquals("bad_input", bad.getAs("status"));
    assertEquals("temperature must be >= 0", bad.getAs("error"));
  }

  static final String SETTINGS = "r.status, r.max_new_tokens, r.temperature, r.top_p, r.seed, r.stop, r.policy, r.policy_resolved,"
      + " r.output";

  /** The settings columns of p0's struct for a call with these options (SQL map arguments, e.g. {@code 'seed', '7'}). */
  Row settings(String options) {
    return spark.sql("SELECT " + SETTINGS + " FROM (SELECT longsieve_result(text, map(" + options + ")) AS r FROM docs"
        + " WHERE doc_id = 'p0')").first();
  }

  @Test
  void theStructCarriesTheSettingsUsedGreedyByDefault() {
    Row r = settings("");
    assertEquals("ok", r.getString(0), r.toString());
    assertEquals(4, r.getInt(1), "the session's maxNewTokens");
    assertEquals(0.0, r.getDouble(2), "greedy");
    assertEquals(1.0, r.getDouble(3));
    assertEquals(0L, r.getLong(4));
    assertEquals(List.of(), r.getList(5));
    assertEquals("dense", r.getString(6));
    assertEquals("dense", r.getString(7));
  }

  @Test
  void theStructCarriesACallsOwnSettingsAndTheSameSeedGivesTheSameOutput() {
    String options = "'max_new_tokens', '3', 'temperature', '0.8', 'top_p', '0.9', 'seed', '7', 'stop', '[\"zz\", \"yy\"]',"
        + " 'policy', 'tsa'";
    Row r = settings(options);
    assertEquals("ok", r.getString(0), r.toString());
    assertEquals(3, r.getInt(1));
    assertEquals(0.8, r.getDouble(2));
    assertEquals(0.9, r.getDouble(3));
    assertEquals(7L, r.getLong(4));
    assertEquals(List.of("zz", "yy"), r.getList(5));
    assertTrue(r.getString(6).startsWith("tsa"), r.toString());
    assertNotNull(r.getString(7), "the engine ran: its resolved policy");
    assertTrue(r.getString(7).startsWith("tsa"), r.toString());
    assertEquals(r.getString(8), settings(options).getString(8), "the same seed, the same output");
  }

  @Test
  void aCallsOptionWinsOverTheSessionsSetting() {
    try {
      spark.conf().set("spark.longsieve.temperature", "0.5");
      spark.conf().set("spark.longsieve.seed", "11");
      LongSieveSql.register(spark);
      Row session = settings("");
      assertEquals(0.5, session.getDouble(2), session.toString());
      assertEquals(11L, session.getLong(4));
      Row call = settings("'temperature', '0', 'max_new_tokens', '2'");
      assertEquals(0.0, call.getDouble(2), call.toString());
      assertEquals(11L, call.getLong(4), "the session's seed where the call sets none");
      assertEquals(2, call.getInt(1));
    } finally {
      spark.conf().unset("spark.longsieve.temperature");
      spark.conf().unset("spark.longsieve.seed");
    }
  }

  @Test
  void aFailedCallCarriesItsSettingsABadInputOneNone() {
    Row bad = settings("'colour', 'red'");
    assertEquals("bad_input", bad.getString(0));
    for (int i = 1; i <= 7; i++) assertTrue(bad.isNullAt(i), "column " + i + " of " + bad);
    String longPrompt = String.join(" ", JobTestSupport.words(5000));
    spark.createDataFrame(List.of(RowFactory.create("long", longPrompt)),
        new StructType().add("doc_id", DataTypes.StringType).add("text", DataTypes.StringType)).createOrReplaceTempView("long_docs");
    Row tooLong = spark.sql("SELECT " + SETTINGS + " FROM (SELECT longsieve_result(text, map('seed', '5')) AS r FROM long_docs)")
        .first();
    assertEquals("too_long", tooLong.getString(0), tooLong.toString());
    assertEquals(4, tooLong.getInt(1));
    assertEquals(5L, tooLong.getLong(4));
    assertEquals("dense", tooLong.getString(6));
    assertTrue(tooLong.isNullAt(7), "the engine did not run: " + tooLong);
  }
}
