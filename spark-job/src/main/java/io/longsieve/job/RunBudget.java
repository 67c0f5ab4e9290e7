package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.when;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * Run budgets ({@code --max-docs}, {@code --max-total-tokens}): documents past the budget get
 * {@code budget_exceeded} rows instead of running, and a later {@code --resume} run (which re-runs
 * every doc_id without an ok row) picks them up.
 *
 * <p>The budget is spent on the driver, before generation, in input order (file path, then line):
 * each document reserves its estimated prompt tokens (characters / charsPerToken + the template, as
 * for partitioning) plus maxNewTokens, the most it can generate. Documents are admitted while both
 * budgets hold; from the first one that does not fit, every later document is budget_exceeded (a
 * budget stops the run, it does not pick small documents). Spending up front keeps the choice a pure
 * function of the input, so a retried task runs the same documents, and the engine's output tokens
 * never go past their reservation; only an estimate below the true prompt length can make the
 * run's actual tokens (in the manifest) exceed the token budget.
 */
final class RunBudget {
  private RunBudget() {}

  private static final Logger LOG = LogManager.getLogger(RunBudget.class);

  /**
   * The documents with the budget applied, and what it did for the manifest.
   *
   * @param rows     the input rows, budget_exceeded rows marked (status and error set)
   * @param admitted documents left to run
   * @param exceeded documents marked budget_exceeded
   * @param reserved tokens reserved by the admitted documents
   */
  record Applied(Dataset<Row> rows, long admitted, long exceeded, long reserved) {}

  static Applied apply(Dataset<Row> todo, RunOptions o) {
    OpsOptions ops = o.ops();
    if (!ops.hasBudget()) return new Applied(todo, -1, 0, 0);
    List<Row> docs = todo.where(col("status").isNull()).select("file_path", "line", "size", "max_new_tokens")
        .orderBy("file_path", "line").collectAsList();
    long admitted = 0;
    long reserved = 0;
    Row cut = null;
    for (Row d : docs) {
      long need = reservation(d.getLong(2), d.isNullAt(3) ? o.maxNewTokens() : d.getInt(3), o);
      boolean docsLeft = ops.maxDocs() <= 0 || admitted < ops.maxDocs();
      boolean tokensLeft = ops.maxTotalTokens() <= 0 || reserved + need <= ops.maxTotalTokens();
      if (!docsLeft || !tokensLeft) {
        cut = d;
        break;
      }
      admitted++;
      reserved += need;
    }
    if (cut == null) {
      LOG.info("run budget: all {} documents fit ({} tokens reserved)", admitted, reserved);
      return new Applied(todo, admitted, 0, reserved);
    }
    long exceeded = docs.size() - admitted;
    String why = reason(ops, admitted, reserved);
    LOG.warn("run budget spent: {}; {} documents get {} rows (run again with --resume to process them)", why, exceeded,
        JobSchemas.BUDGET_EXCEEDED);
    String file = cut.getString(0);
    long line = cut.getLong(1);
    Column past = col("status").isNull()
        .and(col("file_path").gt(lit(file)).or(col("file_path").equalTo(lit(file)).and(col("line").geq(lit(line)))));
    Dataset<Row> rows = todo
        .withColumn("error", when(past, lit("run budget spent (" + why + "); run again with --resume to process it"))
            .otherwise(col("error")))
        .withColumn("status", when(past, lit(JobSchemas.BUDGET_EXCEEDED)).otherwise(col("status")));
    return new Applied(rows, admitted, exceeded, reserved); // withColumn keeps an existing column's place
  }

  /** Tokens one document reserves: its estimated prompt plus the most it can generate (its row's max_new_tokens, else the run's). */
  static long reservation(long size, int maxNewTokens, RunOptions o) {
    return CostModel.estimateTokens(size, o.production().charsPerToken()) + GenerationStage.TEMPLATE_TOKENS
        + maxNewTokens;
  }

  private static String reason(OpsOptions ops, long admitted, long reserved) {
    if (ops.maxDocs() > 0 && admitted >= ops.maxDocs()) return "--max-docs " + ops.maxDocs();
    return "--max-total-tokens " + ops.maxTotalTokens() + ": " + reserved
        + " tokens reserved by the documents before (estimated prompt + max new tokens each)";
  }

  /** The manifest's "budget" entry; null when no budget was set. */
  static Map<String, Object> manifest(RunOptions o, Applied a, RunSummary s) {
    if (!o.ops().hasBudget()) return null;
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("max_total_tokens", o.ops().maxTotalTokens());
    m.put("max_docs", o.ops().maxDocs());
    m.put("admitted_docs", a.admitted());
    m.put("reserved_tokens", a.reserved());
    m.put("budget_exceeded", a.exceeded());
    m.put("spent", a.exceeded() > 0);
    m.put("tokens_used", s.inputTokens() + s.outputTokens());
    return m;
  }
}
