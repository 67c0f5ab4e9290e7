package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;

/**
 * The shadow audit: a seeded sample by doc_id, run again with dense attention in the same job; the
 * audit table compares each answer with the dense one and the manifest carries the run's agreement.
 */
class ShadowAuditTest extends SparkSessionTest {

  @Test
  void theSampleIsAPureFunctionOfSeedAndDocIdAndTakesTheFraction() {
    long in = IntStream.range(0, 10_000).filter(i -> ShadowAudit.sampled("doc-" + i, 7, 0.1)).count();
    assertTrue(in > 900 && in < 1100, in + " of 10000 at 0.1");
    for (int i = 0; i < 100; i++) {
      assertEquals(ShadowAudit.sampled("doc-" + i, 7, 0.3), ShadowAudit.sampled("doc-" + i, 7, 0.3));
      // a larger fraction keeps every document of a smaller one
      if (ShadowAudit.sampled("doc-" + i, 7, 0.2)) assertTrue(ShadowAudit.sampled("doc-" + i, 7, 0.5));
    }
    assertTrue(IntStream.range(0, 100).anyMatch(i -> ShadowAudit.sampled("doc-" + i, 1, 0.3)
        != ShadowAudit.sampled("doc-" + i, 2, 0.3)), "the seed changes the sample");
    assertTrue(!ShadowAudit.sampled("x", 0, 0) && ShadowAudit.sampled("x", 0, 1));
  }

  @Test
  void theReadmeDemoCommandAuditsExactlyOneDocument() throws IOException {
    // the README's run command is the demo: its --audit-fraction must pick one of the bundled documents
    String readme = Files.readString(Path.of("..", "README.md"));
    java.util.regex.Matcher m = java.util.regex.Pattern
        .compile("bin/longsieve run --input examples/docs.jsonl --output out/demo --audit-fraction ([0-9.]+)\n")
        .matcher(readme);
    assertTrue(m.find(), "the README's demo command turns the audit on");
    double fraction = Double.parseDouble(m.group(1));
    ObjectMapper json = new ObjectMapper();
    List<String> sampled = Files.readAllLines(Path.of("..", "examples", "docs.jsonl")).stream()
        .filter(l -> !l.isBlank()).map(l -> readId(json, l)).filter(id -> ShadowAudit.sampled(id, 0, fraction)).toList();
    assertEquals(List.of("summary-2"), sampled, "the README names the one document it audits");
  }

  private static String readId(ObjectMapper json, String line) {
    try {
      return json.readTree(line).get("doc_id").asText();
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  @Test
  void answersCompareByWords() {
    assertEquals(1.0, ShadowAudit.tokenF1("The bridge is old", "the bridge is old"), 1e-9);
    assertEquals(0.0, ShadowAudit.tokenF1("cows", "bridge"), 1e-9);
    assertEquals(2 * 0.5 * 1.0 / 1.5, ShadowAudit.tokenF1("the bridge", "bridge"), 1e-9);
    assertNull(ShadowAudit.firstDivergentToken("a b c", "a  b c"));
    assertEquals(1, ShadowAudit.firstDivergentToken("a b c", "a x c"));
    assertEquals(2, ShadowAudit.firstDivergentToken("a b", "a b c"));
  }

  @Test
  void aSparseRunIsAuditedAgainstDenseInTheSameJob() throws IOException {
    String[] lines = new String[6];
    for (int i = 0; i < lines.length; i++) {
      lines[i] = JobTestSupport.json("d" + i, "summary", "Item " + i + ": " + String.join(" ", JobTestSupport.words(60)), null);
    }
    Path in = JobTestSupport.jsonl(dir, "docs.jsonl", lines);
    Path out = dir.resolve("out");
    LongSieveJob.run(spark, JobTestSupport.options(in, out, "audited", Map.of("spark.longsieve.policy",
        "tokenselect:k=8,sinks=4,window=8", "spark.longsieve.auditFraction", "0.5", "spark.longsieve.auditSeed", "3",
        "spark.longsieve.maxNewTokens", "6")));
    List<String> expected = IntStream.range(0, 6).mapToObj(i -> "d" + i)
        .filter(d -> ShadowAudit.sampled(d, 3, 0.5)).sorted().toList();
    List<Row> audit = spark.read().parquet(out.resolve("audit").toString()).where(col("run_id").equalTo("audited"))
        .orderBy("doc_id").collectAsList();
    assertEquals(expected, audit.stream().map(r -> r.<String>getAs("doc_id")).toList());
    for (Row r : audit) {
      assertEquals("ok", r.getAs("dense_status"));
      assertTrue(r.<String>getAs("policy").contains("tokenselect:") && r.<String>getAs("policy").contains("k=8,"), r.<String>getAs("policy"));
      double f1 = r.getAs("token_f1");
      assertTrue(f1 >= 0 && f1 <= 1);
      if (r.<Boolean>getAs("exact_match")) {
        assertEquals(1.0, f1, 1e-9);
        assertNull(r.getAs("first_divergent_token"));
      }
      // the policy teacher-forced along the dense answer: 16 of ~70 keys per query cost some KL
      double kl = r.getAs("kl_mean");
      double klMax = r.getAs("kl_max");
      double top1 = r.getAs("top1_agreement");
      assertTrue(kl > 0 && klMax >= kl && top1 >= 0 && top1 <= 1, kl + " " + klMax + " " + top1);
    }
    JsonNode a = new ObjectMapper().readTree(Files.readString(out.resolve("runs").resolve("audited.json"))).get("audit");
    assertEquals(expected.size(), a.get("documents").asInt());
    assertEquals("dense", a.get("against").asText());
    double mean = audit.stream().mapToDouble(r -> r.<Double>getAs("token_f1")).average().orElse(Double.NaN);
    assertEquals(mean, a.get("agreement_token_f1").asDouble(), 1e-9);
    assertEquals(audit.stream().mapToDouble(r -> r.<Double>getAs("kl_mean")).average().orElseThrow(),
        a.get("kl_mean").asDouble(), 1e-12);
    assertEquals(audit.stream().mapToDouble(r -> r.<Double>getAs("kl_max")).max().orElseThrow(),
        a.get("kl_max").asDouble(), 1e-12);
    assertEquals(audit.stream().mapToDouble(r -> r.<Double>getAs("top1_agreement")).average().orElseThrow(),
        a.get("top1_agreement").asDouble(), 1e-12);
    assertEquals(a.get("kl_mean").asDouble(), LongSieveMetrics.RUN_AUDIT_KL_MEAN_MICRO.get() / 1e6, 1e-6);
  }

  @Test
  void denseAuditedAgainstDenseAgreesExactly() throws IOException {
    Path in = JobTestSupport.jsonl(dir, "dense.jsonl", JobTestSupport.json("a", "summary", "The market opened.", null),
        JobTestSupport.json("b", "summary", "The farm grew.", null));
    Path out = dir.resolve("out-dense");
    LongSieveJob.run(spark, JobTestSupport.options(in, out, "dense", Map.of("spark.longsieve.auditFraction", "1")));
    JsonNode a = new ObjectMapper().readTree(Files.readString(out.resolve("runs").resolve("dense.json"))).get("audit");
    assertEquals(2, a.get("compared").asInt());
    assertEquals(1.0, a.get("exact_match_rate").asDouble(), 1e-9);
    assertEquals(1.0, a.get("agreement_token_f1").asDouble(), 1e-9);
    assertEquals(0.0, a.get("kl_mean").asDouble());
    assertEquals(0.0, a.get("kl_max").asDouble());
    assertEquals(1.0, a.get("top1_agreement").asDouble());
    assertEquals(1000, LongSieveMetrics.RUN_AUDIT_TOP1_PERMILLE.get());
    for (Row r : spark.read().parquet(out.resolve("audit").toString()).collectAsList()) {
      assertEquals(0.0, r.<Double>getAs("kl_mean"));
      assertEquals(1.0, r.<Double>getAs("top1_agreement"));
    }
  }

  @Test
  void theAuditTableHasTheFidelityColumns() {
    for (String c : new String[] {"kl_mean", "kl_max", "top1_agreement"}) {
      assertEquals(org.apache.spark.sql.types.DataTypes.DoubleType, JobSchemas.AUDIT.apply(c).dataType(), c);
    }
  }

  @Test
  void anAuditWithNothingToAuditWritesAnEmptyTableSaysSoAndExitsZero() throws IOException {
    long seed = 0; // a seed that leaves d0, the one document the budget admits, out of the sample and takes d1
    while (ShadowAudit.sampled("d0", seed, 0.5) || !ShadowAudit.sampled("d1", seed, 0.5)) seed++;
    Path in = JobTestSupport.jsonl(dir, "docs.jsonl", JobTestSupport.json("d0", "summary", "The market opened.", null),
        JobTestSupport.json("d0", "summary", "The market opened again.", null),
        JobTestSupport.json("d1", "summary", "The farm grew.", null),
        JobTestSupport.json("d1", "summary", "The farm grew again.", null),
        JobTestSupport.json("d2", "summary", "The bridge is old.", null));
    Path out = dir.resolve("out");
    String[] common = {"--input", in.toString(), "--output", out.toString(), "--audit-fraction", "0.5", "--conf",
        "spark.longsieve.auditSeed=" + seed};

    // the budget admits d0 alone, outside the sample; the sampled d1 is budget_exceeded
    JobTestSupport.Cli first = JobTestSupport.run(concat(common, "--run-id", "first", "--max-docs", "1", "--conf",
        "spark.longsieve.report=true"));
    assertEquals(0, first.code(), first.err());
    assertEquals(0, spark.read().parquet(out.resolve("audit").toString()).where(col("run_id").equalTo("first")).count(),
        "an empty audit partition that reads with its schema");
    JsonNode a = manifestAudit(out, "first");
    assertEquals(0, a.get("documents").asInt());
    assertTrue(a.get("note").asText().startsWith("0 documents audited"), a.toString());
    assertTrue(Files.readString(out.resolve("report").resolve("first.html")).contains("0 documents audited"));

    // the rest: d1 runs once (its second row is duplicate_id) and is audited once, as is d2 if sampled
    JobTestSupport.Cli second = JobTestSupport.run(concat(common, "--run-id", "second", "--resume"));
    assertEquals(0, second.code(), second.err());
    List<Row> audit = spark.read().parquet(out.resolve("audit").toString()).where(col("run_id").equalTo("second"))
        .collectAsList();
    List<String> expected = ShadowAudit.sampled("d2", seed, 0.5) ? List.of("d1", "d2") : List.of("d1");
    assertEquals(expected, audit.stream().map(r -> r.<String>getAs("doc_id")).sorted().toList(), "one row per document");
    assertEquals(expected.size(), manifestAudit(out, "second").get("documents").asInt());

    // nothing new to run, so nothing to audit
    JobTestSupport.Cli third = JobTestSupport.run(concat(common, "--run-id", "third", "--resume"));
    assertEquals(0, third.code(), third.err());
    assertEquals(0, manifestAudit(out, "third").get("documents").asInt());
  }

  private static JsonNode manifestAudit(Path out, String runId) throws IOException {
    return new ObjectMapper().readTree(Files.readString(out.resolve("runs").resolve(runId + ".json"))).get("audit");
  }

  private static String[] concat(String[] a, String... b) {
    String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, all, a.length, b.length);
    return all;
  }
}
