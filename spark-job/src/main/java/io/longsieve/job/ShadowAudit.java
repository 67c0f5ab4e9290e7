package io.longsieve.job;

import static org.apache.spark.sql.functions.avg;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.max;
import static org.apache.spark.sql.functions.sum;
import static org.apache.spark.sql.functions.when;


import io.longsieve.policy.PolicySpec;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import org.apache.hadoop.fs.Path;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FilterFunction;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;

/**
 * The shadow audit ({@code --audit-fraction F}): a seeded sample of the run's documents runs a
 * second time with dense attention in the same job, and {@code DIR/audit} (Parquet, by run_id)
 * compares each sampled document's answer with the dense one. The run's agreement (mean token F1
 * and exact-match rate over the documents both runs answered) goes to the manifest, the report and
 * the metrics, so an operator sees per run whether the sparse policy still agrees with dense
 * attention on this run's documents.
 *
 * <p>The sample is a pure function of (seed, doc_id): a document is audited when the first 8 bytes of
 * SHA-256("seed:doc_id"), read as a fraction of 2^64, are below F. A re-run or a retried task audits
 * the same documents. Only documents the run finished ok are sampled, each once: the others have no
 * answer to compare. A sample with no document writes an empty partition and says "0 documents
 * audited" in the log, the manifest and the report.
 *
 * <p>Answers are compared as whitespace-separated words ({@link AnswerAgreement}): exact match of the
 * trimmed texts, token F1 (SQuAD's bag-of-words overlap, lower-cased), and the index of the first
 * word where they differ. Finer, and independent of the answers' wording: the dense pass also runs the
 * run's policy teacher-forced along dense attention's greedy continuation
 * ({@link io.longsieve.engine.FidelityMeter}), giving kl_mean, kl_max and top1_agreement per document (two
 * more runs per audited document: a dense greedy one and the policy's; docs/fidelity.md); the run's figures
 * are their means (kl_max: the largest).
 *
 * <p>Failure semantics: the dense documents run like any other (a failure is an error row with its
 * status in {@code dense_status}, and compares as not comparable); the audit runs after the run's
 * outputs are committed, so a failed audit never costs the outputs.
 */
final class ShadowAudit {
  private ShadowAudit() {}

  private static final Logger LOG = LogManager.getLogger(ShadowAudit.class);

  /** True when {@code docId} is in the audit sample of (seed, fraction). */
  static boolean sampled(String docId, long seed, double fraction) {
    if (fraction <= 0) return false;
    if (fraction >= 1) return true;
    try {
      byte[] h = MessageDigest.getInstance("SHA-256").digest((seed + ":" + docId).getBytes(StandardCharsets.UTF_8));
      long bits = ByteBuffer.wrap(h, 0, 8).getLong() >>> 11; // 53 bits, uniform in [0, 2^53)
      return bits / (double) (1L << 53) < fraction;
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * The audit's run-level figures for the manifest, report and metrics: answer agreement, and fidelity (mean over
   * the documents measured of kl_mean and of top1_agreement, the largest kl_max).
   */
  record Agreement(long documents, long compared, double exactMatchRate, double meanTokenF1, double klMean, double klMax,
                   double top1Agreement) {
    Map<String, Object> manifest(OpsOptions ops, String policy) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("fraction", ops.auditFraction());
      m.put("seed", ops.auditSeed());
      m.put("policy", policy);
      m.put("against", "dense");
      m.put("documents", documents);
      m.put("compared", compared);
      m.put("exact_match_rate", Double.isNaN(exactMatchRate) ? null : exactMatchRate);
      m.put("agreement_token_f1", Double.isNaN(meanTokenF1) ? null : meanTokenF1);
      if (documents == 0) m.put("note", EMPTY_SAMPLE);
      m.put("kl_mean", Double.isNaN(klMean) ? null : klMean);
      m.put("kl_max", Double.isNaN(klMax) ? null : klMax);
      m.put("top1_agreement", Double.isNaN(top1Agreement) ? null : top1Agreement);
      return m;
    }
  }

  /** Why an audit can have no document, for the log, the manifest and the report. */
  static final String EMPTY_SAMPLE = "0 documents audited: no document that this run finished ok falls in the sample "
      + "(the fraction is small for this input, or the sampled documents were budget_exceeded, failed or done by an "
      + "earlier run)";

  /**
   * Runs the sample with dense attention and writes DIR/audit; null when the audit is off. The sample
   * is taken from the run's ok documents, one row each (a repeated doc_id's duplicate_id rows and the
   * documents that failed or were over the budget have no answer to compare). An empty sample writes
   * an empty partition and gives {@code documents} 0.
   *
   * @param todo the run's input rows as they went to the generation stage
   * @param done the run's RESULT rows
   */
  static Agreement run(SparkSession spark, RunOptions o, Dataset<Row> todo, Dataset<Row> done) {
    OpsOptions ops = o.ops();
    if (ops.auditFraction() <= 0) return null;
    long seed = ops.auditSeed();
    double fraction = ops.auditFraction();
    String runId = o.runId();
    Dataset<Row> mine = done.where(col("status").equalTo(JobSchemas.OK))
        .filter((FilterFunction<Row>) r -> sampled(r.getAs("doc_id"), seed, fraction))
        .select("doc_id", "run_id", "policy", "status", "output", "output_tokens", "total_ms");
    // the input rows of those documents: the first row of each doc_id, the one that ran
    Dataset<Row> ids = mine.select(col("doc_id").as("sampled_id"));
    Dataset<Row> sample = todo.where(col("status").isNull()).join(ids, col("doc_id").equalTo(col("sampled_id")), "left_semi");
    DocumentProcessor dense = new DocumentProcessor(o.engineSpec(), runId, o.maxNewTokens(), PolicySpec.DENSE, o.truncate(),
        o.generation()).measuringFidelityOf(o.policy()); // the same prompts and sampling, only the policy differs
    int parts = Math.max(1, spark.sparkContext().defaultParallelism());
    JavaRDD<Row> denseRows = sample.javaRDD().repartition(parts).mapPartitions(dense::call);
    Dataset<Row> d = spark.createDataFrame(denseRows, dense.schema()).select(col("doc_id"),
        col("status").as("dense_status"), col("output").as("dense_output"), col("output_tokens").as("dense_output_tokens"),
        col("total_ms").as("dense_total_ms"), col("kl_mean"), col("kl_max"), col("top1_agreement"));
    String policy = o.policy().canonical();
    Dataset<Row> audit = mine.join(d, "doc_id").map((MapFunction<Row, Row>) r -> compare(r, runId, policy),
        Encoders.row(JobSchemas.AUDIT));
    String table = new Path(o.output(), "audit").toString();
    spark.sparkContext().setJobDescription("longsieve " + runId + ": shadow audit against dense");
    audit.write().mode(SaveMode.Append).partitionBy("run_id").parquet(table);
    Dataset<Row> written = OwnTables.run(spark, o.output(), "audit", runId, JobSchemas.AUDIT);
    Row agg = written.agg(count(lit(1)), sum(when(col("exact_match").isNotNull(), 1).otherwise(0)),
            avg(when(col("exact_match"), 1.0).otherwise(when(col("exact_match").isNotNull(), 0.0))), avg(col("token_f1")),
            avg(col("kl_mean")), max(col("kl_max")), avg(col("top1_agreement")))
        .first();
    Agreement a = new Agreement(agg.getLong(0), agg.isNullAt(1) ? 0 : agg.getLong(1), orNaN(agg, 2), orNaN(agg, 3),
        orNaN(agg, 4), orNaN(agg, 5), orNaN(agg, 6));
    if (a.documents() == 0) {
      writeEmptyPartition(spark, table, runId);
      LOG.info("run {}: shadow audit (fraction {}, seed {}): {}", runId, fraction, seed, EMPTY_SAMPLE);
      return a;
    }
    LOG.info("run {}: shadow audit of {} documents against dense: agreement (token F1) {}, exact match {}, "
        + "KL(dense || policy) mean {} max {}, top-1 agreement {}", runId, a.documents(), fmt(a.meanTokenF1()),
        fmt(a.exactMatchRate()), fmt(a.klMean()), fmt(a.klMax()), fmt(a.top1Agreement()));
    return a;
  }

  private static double orNaN(Row r, int i) {
    return r.isNullAt(i) ? Double.NaN : r.getDouble(i);
  }

  /**
   * The run's partition as one empty Parquet file with the audit's columns: Spark writes nothing for a
   * partitioned write of no rows, and a table with no file has no schema for its readers to find.
   */
  private static void writeEmptyPartition(SparkSession spark, String table, String runId) {
    spark.createDataFrame(java.util.List.<Row>of(), OwnTables.withoutRunId(JobSchemas.AUDIT)).coalesce(1).write()
        .mode(SaveMode.Append).parquet(new Path(table, "run_id=" + runId).toString());
  }

  private static String fmt(double d) {
    return Double.isNaN(d) ? "n/a" : String.format(Locale.ROOT, "%.3f", d);
  }

  private static Row compare(Row r, String runId, String policy) {
    String status = r.getAs("status");
    String denseStatus = r.getAs("dense_status");
    boolean both = JobSchemas.OK.equals(status) && JobSchemas.OK.equals(denseStatus);
    String a = r.getAs("output");
    String b = r.getAs("dense_output");
    Boolean exact = both ? a.trim().equals(b.trim()) : null;
    Double f1 = both ? tokenF1(a, b) : null;
    Integer diverge = both ? firstDivergentToken(a, b) : null;
    boolean denseOk = JobSchemas.OK.equals(denseStatus);
    return new GenericRowWithSchema(new Object[] {r.getAs("doc_id"), runId, policy, status, denseStatus, exact, f1,
        diverge, r.getAs("output_tokens"), r.getAs("dense_output_tokens"), r.getAs("total_ms"), r.getAs("dense_total_ms"),
        denseOk ? r.getAs("kl_mean") : null, denseOk ? r.getAs("kl_max") : null, denseOk ? r.getAs("top1_agreement") : null},
        JobSchemas.AUDIT);
  }

  static double tokenF1(String answer, String reference) {
    return AnswerAgreement.tokenF1(answer, reference);
  }

  static Integer firstDivergentToken(String x, String y) {
    return AnswerAgreement.firstDivergentToken(x, y);
  }
}
