package io.longsieve.job.eval;

import static org.apache.spark.sql.functions.col;

import io.longsieve.eval.DocResult;
import io.longsieve.eval.EvalOptions;
import io.longsieve.eval.EvalRunner;
import io.longsieve.eval.EvalSuite;
import io.longsieve.eval.Scoring;
import io.longsieve.eval.SuiteItem;
import io.longsieve.job.JobSchemas;
import io.longsieve.job.LongSieveJob;
import io.longsieve.job.OwnTables;
import io.longsieve.job.RunOptions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * The quality suite through the real Spark job: the suite file is the job's input, one job run
 * per policy (run ids {@code <run-id>-p<i>}, outputs under {@code <output>/eval/job/}), then
 * every output row is scored against its suite document. A document the job marked with an
 * error status scores 0 and counts in n_errors.
 */
public final class JobEval {
  private JobEval() {}

  /** Generation limit for every document unless --max-new-tokens says otherwise (the job has one per run): the summary's. */
  static final int MAX_NEW_TOKENS = EvalSuite.maxNewTokens("summary");

  public static List<DocResult> run(SparkSession spark, EvalOptions o, List<SuiteItem> suite, List<String> policies,
      String master) {
    Map<String, SuiteItem> byId = new HashMap<>();
    for (SuiteItem it : suite) byId.put(it.docId(), it);
    String input = o.evalDir().resolve("suite.jsonl").toString();
    String jobOut = o.evalDir().resolve("job").toString();
    List<DocResult> out = new ArrayList<>();
    for (int i = 0; i < policies.size(); i++) {
      String runId = o.runId + "-p" + i;
      Map<String, String> s = new LinkedHashMap<>();
      s.put("spark.longsieve.input", input);
      s.put("spark.longsieve.output", jobOut);
      s.put("spark.longsieve.model", o.model.toString());
      s.put("spark.longsieve.runId", runId);
      s.put("spark.longsieve.maxNewTokens", Integer.toString(o.maxNewTokens > 0 ? o.maxNewTokens : MAX_NEW_TOKENS));
      s.put("spark.longsieve.policy", policies.get(i));
      s.put("spark.longsieve.device", o.device);
      s.put("spark.longsieve.threads", Integer.toString(o.threads));
      s.put("spark.longsieve.prefillChunk", Integer.toString(o.prefillChunk));
      s.put("spark.master", master);
      LongSieveJob.run(spark, RunOptions.fromSettings(s));
      List<Row> rows = OwnTables.run(spark, jobOut, "outputs", runId, JobSchemas.OUTPUTS)
          .join(OwnTables.run(spark, jobOut, "stats", runId, JobSchemas.STATS)
              .select("doc_id", "total_ms", "selected_fraction_by_layer"), "doc_id")
          .select("doc_id", "status", "error", "output", "input_tokens", "total_ms", "selected_fraction_by_layer")
          .collectAsList();
      for (Row r : rows) { // by column name: the job's tables may gain columns
        SuiteItem it = byId.get(r.<String>getAs("doc_id"));
        if (it == null) continue;  // not a suite document (cannot happen: the suite is the input)
        String status = r.getAs("status");
        String error = r.getAs("error");
        String output = r.getAs("output");
        Double totalMs = r.getAs("total_ms");
        Integer inputTokens = r.getAs("input_tokens");
        boolean ok = "ok".equals(status);
        String text = ok && output != null ? output : "";
        double ms = totalMs == null ? Double.NaN : totalMs;
        double att = Double.NaN;
        int fractions = r.fieldIndex("selected_fraction_by_layer");
        if (ok && !r.isNullAt(fractions)) {
          List<Float> l = r.getList(fractions);
          float[] a = new float[l.size()];
          for (int k = 0; k < a.length; k++) a[k] = l.get(k);
          att = EvalRunner.attended(a);
        }
        out.add(new DocResult(policies.get(i), it, text, ok ? Scoring.score(it, text) : 0.0, att, ms,
            inputTokens == null ? 0 : inputTokens, ok ? null : status + (error == null ? "" : ": " + error), null));
      }
    }
    return out;
  }
}
