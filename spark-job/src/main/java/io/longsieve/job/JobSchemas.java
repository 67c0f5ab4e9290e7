package io.longsieve.job;

import static org.apache.spark.sql.types.DataTypes.BooleanType;
import static org.apache.spark.sql.types.DataTypes.DoubleType;
import static org.apache.spark.sql.types.DataTypes.FloatType;
import static org.apache.spark.sql.types.DataTypes.IntegerType;
import static org.apache.spark.sql.types.DataTypes.LongType;
import static org.apache.spark.sql.types.DataTypes.StringType;

import java.util.List;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The job's table shapes, in one place so the report and notebooks can rely on them. Column names
 * are snake_case. Both output tables are Parquet, partitioned by {@code run_id}.
 *
 * <p>{@code DIR/outputs}: one row per input row, {@link #OUTPUT_COLUMNS}. {@code DIR/stats}: one row
 * per input row too, {@link #STATS_COLUMNS}; the engine's columns are null where the engine did not
 * run (status other than ok/engine_error).
 */
public final class JobSchemas {
  private JobSchemas() {}

  public static final String OK = "ok";
  public static final String BAD_INPUT = "bad_input";
  public static final String DUPLICATE_ID = "duplicate_id";
  public static final String TOO_LONG = "too_long";
  public static final String ENGINE_ERROR = "engine_error";
  public static final String OOM = DocumentAttempts.OOM;         // out of memory after retries with smaller chunks
  public static final String TIMEOUT = DocumentAttempts.TIMEOUT; // past spark.longsieve.docTimeoutSeconds
  public static final String BUDGET_EXCEEDED = "budget_exceeded"; // past --max-docs / --max-total-tokens (RunBudget)
  /** A JSON-schema row whose output was cut (max_new_tokens or the context) before the document closed. */
  public static final String JSON_INCOMPLETE = "json_incomplete";
  public static final List<String> STATUSES = List.of(OK, BAD_INPUT, DUPLICATE_ID, TOO_LONG, OOM, TIMEOUT, ENGINE_ERROR,
      BUDGET_EXCEEDED, JSON_INCOMPLETE);

  public static final List<String> TASKS = List.of("summary", "qa", "multi_doc_qa");

  /** One document of a multi_doc_qa row. */
  public static final StructType DOCUMENT = new StructType()
      .add("title", StringType, true)
      .add("text", StringType, true);

  /** One turn of a row's chat conversation ({@code messages}). */
  public static final StructType MESSAGE = new StructType()
      .add("role", StringType, false)     // system, user or assistant
      .add("content", StringType, false);

  /** An input line or row before parsing: its JSON text and where it came from. */
  public static final StructType LINE = new StructType()
      .add("value", StringType, true)        // the JSON object text (for Parquet: the row as JSON)
      .add("valid_utf8", BooleanType, true)  // false: the raw bytes were not UTF-8
      .add("file_name", StringType, false)   // the file's name, for generated ids
      .add("file_path", StringType, false)   // the full path, for ordering
      .add("line", LongType, false);         // 1-based line (JSONL) or row (Parquet) number in the file

  /** A parsed input row; status null means "valid so far". */
  public static final StructType PARSED = new StructType()
      .add("doc_id", StringType, false)
      .add("id_generated", BooleanType, false)  // true: the row had no doc_id (see DocumentParser)
      .add("source", StringType, false)         // <file name>:<line>, for messages
      .add("file_path", StringType, false)
      .add("line", LongType, false)
      .add("task", StringType, true)
      .add("text", StringType, true)
      .add("documents", DataTypes.createArrayType(DOCUMENT, true), true)
      .add("question", StringType, true)
      .add("reference", StringType, true)
      .add("status", StringType, true)
      .add("error", StringType, true)
      .add("size", LongType, false)             // characters of text/documents, orders long documents first
      // the row's own prompt and generation settings (RowSettings); null: the run's apply
      .add("prompt", StringType, true)          // the row's prompt template, as written
      .add("system", StringType, true)
      .add("raw", BooleanType, true)
      .add("max_new_tokens", IntegerType, true)
      .add("temperature", DoubleType, true)
      .add("top_p", DoubleType, true)
      .add("seed", LongType, true)
      .add("stop", DataTypes.createArrayType(StringType, false), true)
      .add("fields", DataTypes.createMapType(StringType, StringType, false), true) // other scalar fields, for placeholders
      .add("messages", DataTypes.createArrayType(MESSAGE, false), true) // the row's chat conversation, instead of a prompt
      .add("json_schema", StringType, true);   // the row's own JSON schema (checked, compact); null: the run's, if any

  /** Everything computed for one row, once: both output tables are projections of it. */
  public static final StructType RESULT = new StructType()
      .add("doc_id", StringType, false)
      .add("run_id", StringType, false)
      .add("task", StringType, true)
      .add("status", StringType, false)
      .add("error", StringType, true)
      .add("notes", StringType, true)             // e.g. what --truncate cut
      .add("output", StringType, true)
      .add("input_tokens", IntegerType, true)
      .add("output_tokens", IntegerType, true)
      .add("finish_reason", StringType, true)     // eos, stop, length, context_full, json_complete
      .add("reference", StringType, true)
      .add("source", StringType, false)           // <file name>:<line or row>
      .add("backend", StringType, true)
      .add("device", StringType, true)
      .add("policy", StringType, true)            // canonical: as asked, every parameter; on every row
      .add("policy_resolved", StringType, true)   // canonical with what the model folder decided, e.g.
                                                  // layers=auto(2-3) (auto-unprofiled(3-5) without a profile);
                                                  // null where the engine did not run
      .add("ttft_ms", DoubleType, true)
      .add("prefill_ms", DoubleType, true)
      .add("decode_ms", DoubleType, true)
      .add("total_ms", DoubleType, true)          // the row's wall time in the task: token counting and any wait
                                                  // for the engine (shared by the executor's tasks) included
      .add("executor_id", StringType, false)
      .add("partition_id", IntegerType, false)
      .add("attended_tokens_mean", DoubleType, true)
      .add("selected_fraction_by_layer", DataTypes.createArrayType(FloatType, false), true)
      .add("selection_cache_hit_rate", DoubleType, true)
      .add("kv_bytes_before", LongType, true)
      .add("kv_bytes_after", LongType, true)
      .add("sparse_layers", IntegerType, true)
      .add("selection_ms", DoubleType, true)
      .add("attention_ms", DoubleType, true)
      .add("decode_batch_mean", DoubleType, true)  // documents per decode step this one shared, on average
      .add("prefix_tokens_reused", IntegerType, true) // prompt tokens taken from a prefix another row computed; 0: none
      // what the row was generated with, the row's value over the run's (GenerationOptions)
      .add("prompt_source", StringType, true)      // row (its prompt), run (--prompt-template) or preset:<name>
      .add("max_new_tokens", IntegerType, true)
      .add("temperature", DoubleType, true)        // 0: greedy
      .add("top_p", DoubleType, true)
      .add("seed", LongType, true)
      .add("stop", DataTypes.createArrayType(StringType, false), true);

  /**
   * The shadow audit's dense pass ({@link ShadowAudit}): a RESULT row of the dense run plus the run's policy measured
   * against it along dense attention's own greedy continuation (io.longsieve.engine.FidelityMeter); null where the
   * document did not run or the measurement failed.
   */
  public static final StructType AUDIT_DENSE_RESULT = RESULT
      .add("kl_mean", DoubleType, true)            // mean over steps of KL(dense ‖ policy), nats
      .add("kl_max", DoubleType, true)             // largest per-step KL
      .add("top1_agreement", DoubleType, true);    // share of steps where the policy's top-1 token is dense's

  /**
   * DIR/audit ({@link ShadowAudit}): one row per audited document, a document of the run that ended ok
   * and falls in the sample; run_id is the partition column. A run whose sample is empty writes its
   * partition as one empty file with this schema, so the table reads the same either way.
   */
  public static final StructType AUDIT = new StructType()
      .add("doc_id", StringType, false)
      .add("run_id", StringType, false)
      .add("policy", StringType, true)               // the run's policy, compared with dense
      .add("status", StringType, true)               // the run's row status (ok)
      .add("dense_status", StringType, true)         // the dense row's status
      .add("exact_match", BooleanType, true)         // trimmed answers equal; null unless both ok
      .add("token_f1", DoubleType, true)             // word-level F1 of the answer against the dense answer
      .add("first_divergent_token", IntegerType, true) // first word index where they differ; null if equal or not both ok
      .add("output_tokens", IntegerType, true)
      .add("dense_output_tokens", IntegerType, true)
      .add("total_ms", DoubleType, true)
      .add("dense_total_ms", DoubleType, true)
      // the run's policy teacher-forced along the dense greedy continuation; null unless the dense row is ok
      .add("kl_mean", DoubleType, true)
      .add("kl_max", DoubleType, true)
      .add("top1_agreement", DoubleType, true);

  /** Columns of DIR/outputs (run_id is the partition column). */
  public static final List<String> OUTPUT_COLUMNS = List.of(
      "doc_id", "run_id", "task", "status", "error", "notes", "output", "input_tokens", "output_tokens",
      "finish_reason", "reference", "source");

  /** Columns of DIR/stats (run_id is the partition column). */
  public static final List<String> STATS_COLUMNS = List.of(
      "doc_id", "run_id", "status", "backend", "device", "policy", "policy_resolved", "ttft_ms", "prefill_ms",
      "decode_ms", "total_ms", "executor_id", "partition_id", "input_tokens", "output_tokens", "attended_tokens_mean",
      "selected_fraction_by_layer", "selection_cache_hit_rate", "kv_bytes_before", "kv_bytes_after",
      "sparse_layers", "selection_ms", "attention_ms", "decode_batch_mean", "prefix_tokens_reused", "prompt_source",
      "max_new_tokens",
      "temperature", "top_p", "seed", "stop");

  /** Schema of DIR/outputs as written (Spark moves run_id, the partition column, last on reading). */
  public static final StructType OUTPUTS = project(RESULT, OUTPUT_COLUMNS);

  /** Schema of DIR/stats as written (Spark moves run_id, the partition column, last on reading). */
  public static final StructType STATS = project(RESULT, STATS_COLUMNS);

  private static StructType project(StructType from, List<String> columns) {
    StructType t = new StructType();
    for (String c : columns) t = t.add(from.apply(c));
    return t;
  }

  /** A map column's value for a Row built in Java: Spark's row encoder wants a Scala Map. */
  static <K, V> scala.collection.Map<K, V> map(java.util.Map<K, V> m) {
    return m == null ? null : scala.jdk.javaapi.CollectionConverters.asScala(m);
  }

  /** An array column's value for a Row built in Java: Spark's row encoder wants a Scala Seq. */
  static <T> scala.collection.immutable.Seq<T> seq(List<T> list) {
    return scala.jdk.javaapi.CollectionConverters.asScala(list).toSeq();
  }
}
