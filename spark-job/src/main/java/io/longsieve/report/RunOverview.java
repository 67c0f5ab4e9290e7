package io.longsieve.report;

import static org.apache.spark.sql.functions.avg;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.sum;
import static org.apache.spark.sql.functions.udf;
import static org.apache.spark.sql.functions.when;

import io.longsieve.job.AnswerAgreement;
import io.longsieve.job.JobSchemas;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * The report's first screen: what ran (model, policy, input, backend), whether a run budget cut it
 * short, the shadow audit's agreement with dense attention, a table per task with accuracy against
 * the input's {@code reference} where rows have one, and a sample of answers next to their
 * references. Read from the run's outputs partition and its manifest.
 *
 * <p>Accuracy against a reference: exact match after trimming, collapsing whitespace, dropping a
 * final full stop and lower-casing (the eval's rule for single answers), and word-level token F1
 * ({@link AnswerAgreement}), both over the ok rows that have a reference.
 */
final class RunOverview {
  private RunOverview() {}

  /** Answers shown in the sample. */
  static final int SAMPLE = 8;

  record TaskRow(String task, long documents, long ok, long withReference, double exactMatch, double tokenF1,
                 double meanInputTokens, double meanOutputTokens) {}

  record Answer(String docId, String task, String status, String output, String reference) {}

  record Data(List<TaskRow> tasks, List<Answer> answers) {
    static final Data EMPTY = new Data(List.of(), List.of());
  }

  static Data read(SparkSession spark, Path out, String runId) throws IOException {
    Map<String, DataType> cols = new LinkedHashMap<>();
    for (String c : List.of("doc_id", "task", "status", "output", "reference", "input_tokens", "output_tokens")) {
      cols.put(c, JobSchemas.RESULT.apply(c).dataType());
    }
    Dataset<Row> rows = RunReport.readRun(spark, new Path(out, "outputs"), runId, cols);
    UserDefinedFunction exact = udf((UDF2<String, String, Double>) (a, r) -> a == null || r == null ? null
        : normalise(a).equals(normalise(r)) ? 1.0 : 0.0, DataTypes.DoubleType);
    UserDefinedFunction f1 = udf((UDF2<String, String, Double>) (a, r) -> a == null || r == null ? null
        : AnswerAgreement.tokenF1(a, r), DataTypes.DoubleType);
    var okRef = col("status").equalTo(JobSchemas.OK).and(col("reference").isNotNull());
    List<TaskRow> tasks = new ArrayList<>();
    for (Row r : rows.withColumn("task", when(col("task").isNull(), lit("(none)")).otherwise(col("task")))
        .groupBy("task").agg(count(lit(1)), sum(when(col("status").equalTo(JobSchemas.OK), 1).otherwise(0)),
            sum(when(okRef, 1).otherwise(0)), avg(when(okRef, exact.apply(col("output"), col("reference")))),
            avg(when(okRef, f1.apply(col("output"), col("reference")))),
            avg(when(col("status").equalTo(JobSchemas.OK), col("input_tokens"))),
            avg(when(col("status").equalTo(JobSchemas.OK), col("output_tokens"))))
        .orderBy("task").collectAsList()) {
      tasks.add(new TaskRow(r.getString(0), r.getLong(1), r.getLong(2), r.getLong(3), d(r, 4), d(r, 5), d(r, 6), d(r, 7)));
    }
    List<Answer> answers = new ArrayList<>();
    for (Row r : rows.where(col("status").equalTo(JobSchemas.OK))
        .orderBy(col("reference").isNull(), col("doc_id")).limit(SAMPLE)
        .select("doc_id", "task", "status", "output", "reference").collectAsList()) {
      answers.add(new Answer(r.getString(0), r.getString(1), r.getString(2), r.getString(3), r.getString(4)));
    }
    return new Data(tasks, answers);
  }

  private static double d(Row r, int i) {
    return r.isNullAt(i) ? Double.NaN : ((Number) r.get(i)).doubleValue();
  }

  static String normalise(String s) {
    return AnswerAgreement.normalised(s);
  }

  /** The header line under the title: model, policy, input, backend, from the manifest. */
  static String header(ManifestFields m) {
    Map<String, String> f = m.scalars();
    if (f.isEmpty()) return "";
    StringBuilder h = new StringBuilder("<p class=\"runhead\" id=\"runhead\">");
    field(h, "model", f.get("model"));
    field(h, "policy", f.get("options.spark.longsieve.policy"));
    field(h, "input", f.get("input"));
    field(h, "backend", f.get("backend") + (f.containsKey("devices") ? " (" + f.get("devices") + ")" : ""));
    String temperature = f.get("options.spark.longsieve.temperature");
    if (temperature != null) { // runs before prompts and sampling were options recorded neither
      String template = f.get("options.spark.longsieve.promptTemplate");
      field(h, "prompt", template != null ? "run template " + template : "task presets");
      field(h, "sampling", (Double.parseDouble(temperature) == 0 ? "greedy"
          : "temperature " + temperature + ", top_p " + f.get("options.spark.longsieve.topP") + ", seed "
              + f.get("options.spark.longsieve.seed")) + " (rows may set their own; the stats have each row's)");
    }
    return h.append("</p>").toString();
  }

  private static void field(StringBuilder h, String label, String value) {
    h.append("<span><b>").append(Html.escape(label)).append("</b> ")
        .append(Html.escape(value == null || value.isBlank() ? "not recorded" : Html.truncate(value, 160)))
        .append("</span> ");
  }

  /** A notice when a run budget stopped documents from running; "" otherwise. */
  static String budget(ManifestFields m) {
    Map<String, String> f = m.scalars();
    if (!"true".equals(f.get("budget.spent"))) return "";
    return "<p class=\"unfinished\" id=\"budget\">Run budget spent (--max-docs " + Html.escape(f.get("budget.max_docs"))
        + ", --max-total-tokens " + Html.escape(f.get("budget.max_total_tokens")) + "; 0 = none): "
        + Html.escape(f.get("budget.admitted_docs")) + " documents ran, " + Html.escape(f.get("budget.budget_exceeded"))
        + " got budget_exceeded rows; " + Html.escape(f.get("budget.tokens_used"))
        + " tokens used (input + output). A run with --resume on the same output runs the rest.</p>";
  }

  /** The shadow audit's section, or "" when the run had none. */
  static String audit(ManifestFields m) {
    Map<String, String> f = m.scalars();
    if (!f.containsKey("audit.documents")) return "";
    if ("0".equals(f.get("audit.documents"))) {
      String note = f.getOrDefault("audit.note", "0 documents audited");
      return "<section id=\"audit\"><h2>Shadow audit against dense attention</h2><p class=\"unfinished\" id=\"audit-empty\">"
          + Html.escape(note) + ". Sample: " + Html.escape(pct(f.get("audit.fraction"))) + " of the documents, seed "
          + Html.escape(f.get("audit.seed")) + "; a larger --audit-fraction or another --audit-seed audits some.</p></section>";
    }
    String agreement = f.get("audit.agreement_token_f1");
    String exact = f.get("audit.exact_match_rate");
    return "<section id=\"audit\"><h2>Shadow audit against dense attention</h2><div class=\"cards\">"
        + card("agreement (mean token F1 of answer vs dense answer)", agreement == null ? "n/a" : pct(agreement))
        + card("exact match (share of the compared documents)", exact == null ? "n/a" : pct(exact))
        + card("documents audited", f.get("audit.documents"))
        + card("compared (both ok)", f.get("audit.compared"))
        + card("mean KL(dense ‖ policy) per token, nats", number(f.get("audit.kl_mean")))
        + card("largest KL of a token", number(f.get("audit.kl_max")))
        + card("top-1 agreement with dense (share of tokens)", f.get("audit.top1_agreement") == null ? "n/a"
            : pct(f.get("audit.top1_agreement")))
        + "</div><p class=\"muted\">A sample of " + Html.escape(pct(f.get("audit.fraction"))) + " of the documents (seed "
        + Html.escape(f.get("audit.seed")) + ", by doc_id) also ran with dense attention; policy "
        + Html.escape(f.get("audit.policy")) + ". Agreement and exact match compare the answers' words; KL and top-1"
        + " agreement compare the next-token distributions with the policy fed dense attention's own greedy answer"
        + " (teacher forcing), so they do not depend on the wording. Per-document rows: the audit table"
        + " (audit/run_id=...).</p></section>";
  }

  /** A KL figure as the manifest has it, to four decimals; n/a when absent. */
  private static String number(String v) {
    try {
      return String.format(java.util.Locale.ROOT, "%.4f", Double.parseDouble(v));
    } catch (NumberFormatException | NullPointerException e) {
      return "n/a";
    }
  }

  private static String pct(String v) {
    try {
      return Html.pct(Double.parseDouble(v));
    } catch (NumberFormatException | NullPointerException e) {
      return "n/a";
    }
  }

  private static String card(String label, String value) {
    return "<div class=\"card\"><div class=\"v\">" + Html.escape(value) + "</div><div class=\"l\">" + Html.escape(label)
        + "</div></div>";
  }

  /** Per task: documents, ok, accuracy against the references, mean tokens; then sample answers. */
  static String tasks(Data d) {
    StringBuilder h = new StringBuilder("<section id=\"tasks\"><h2>Tasks and answers</h2>");
    h.append("<table class=\"tasks\"><tr><th>task</th><th class=\"n\">documents</th><th class=\"n\">ok</th>"
        + "<th class=\"n\">ok with a reference</th><th class=\"n\">exact match (of those)</th>"
        + "<th class=\"n\">token F1 (mean over those)</th><th class=\"n\">input tokens (mean per ok document)</th>"
        + "<th class=\"n\">output tokens (mean per ok document)</th></tr>");
    for (TaskRow t : d.tasks()) {
      h.append("<tr><td>").append(Html.escape(t.task())).append("</td>");
      for (String c : new String[] {Html.num(t.documents()), Html.num(t.ok()), Html.num(t.withReference()),
          t.withReference() == 0 ? "no reference" : Html.pct(t.exactMatch()),
          t.withReference() == 0 ? "no reference" : Html.pct(t.tokenF1()), Html.num(t.meanInputTokens()),
          Html.num(t.meanOutputTokens())}) {
        h.append("<td class=\"n\">").append(Html.escape(c)).append("</td>");
      }
      h.append("</tr>");
    }
    h.append("</table>");
    if (d.answers().isEmpty()) {
      h.append("<p class=\"muted\">No ok answers.</p>");
    } else {
      h.append("<h3>Sample answers</h3><p class=\"muted\">Up to ").append(SAMPLE)
          .append(" ok documents, those with a reference first, by doc_id.</p><table class=\"answers\"><tr>"
              + "<th>doc_id</th><th>task</th><th>answer</th><th>reference</th></tr>");
      for (Answer a : d.answers()) {
        h.append("<tr><td class=\"id\">").append(Html.escape(a.docId())).append("</td><td>").append(Html.escape(a.task()))
            .append("</td><td class=\"msg\">").append(Html.escape(Html.truncate(a.output(), 400)))
            .append("</td><td class=\"msg\">")
            .append(a.reference() == null ? "<span class=\"muted\">none</span>" : Html.escape(Html.truncate(a.reference(), 400)))
            .append("</td></tr>");
      }
      h.append("</table>");
    }
    return h.append("</section>").toString();
  }
}
