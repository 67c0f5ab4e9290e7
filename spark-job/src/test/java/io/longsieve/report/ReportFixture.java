package io.longsieve.report;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.lit;

import io.longsieve.job.JobSchemas;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * A synthetic run in the job's output layout ({@code stats/} and {@code outputs/} Parquet partitioned by run_id, and
 * {@code runs/<run_id>.json}) with the job's columns and types ({@link JobSchemas}), generated in Spark so that 100,000 documents
 * take seconds. Three policies, four executors (executor 3 is a straggler), a few error kinds, and user data that must
 * be escaped (a doc id and an error message holding HTML).
 */
final class ReportFixture {

  static final String DENSE = "dense";
  static final String TOKENSELECT = "tsa + tokenselect:k=2048";
  static final String SELKV = "tsa + selkv:ratio=0.25 + tokenselect:k=1024";
  static final String HOSTILE_DOC_ID = "<script>alert('doc')</script>";
  static final String HOSTILE_ERROR = "bad input <img src=x onerror=alert(1)> & more";
  static final int LAYERS = 16;

  private ReportFixture() {}

  static SparkSession spark() {
    SparkSession spark = SparkSession.builder().master("local[2]").appName("report-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate();
    spark.sparkContext().setLogLevel("WARN");
    return spark;
  }

  /** Writes {@code documents} documents of run {@code runId} under {@code out}, with a manifest of the given wall time. */
  static void writeRun(SparkSession spark, Path out, String runId, long documents, double wallMs) throws IOException {
    Dataset<Row> docs = spark.range(documents).selectExpr(
        "id",
        "case when id = 7 then \"" + HOSTILE_DOC_ID.replace("'", "\\'") + "\" else format_string('doc-%06d', id) end"
            + " as doc_id",
        "case id % 3 when 0 then '" + DENSE + "' when 1 then '" + TOKENSELECT + "' else '" + SELKV + "' end as policy",
        "cast(pow(2, 9 + 8 * rand(1)) as int) as input_tokens",
        "32 + cast(rand(2) * 200 as int) as output_tokens",
        "case when id = 7 then 'engine_error' when id % 97 = 0 then 'engine_error' when id % 211 = 0 then 'too_long'"
            + " else 'ok' end as status",
        "cast(id % 4 as string) as executor_id",
        "cast(id % 16 as int) as partition_id",
        "rand(3) as r");
    docs = docs.selectExpr("*",
        "case when id = 7 then \"" + HOSTILE_ERROR + "\""
            + " when status = 'engine_error' then 'CUDA error: out of memory while allocating KV pages'"
            + " when status = 'too_long' then concat('prompt has ', input_tokens, ' tokens; the limit is 65536')"
            + " end as error",
        "if(executor_id = '3', 1.8, 1.0) as slow");
    docs.cache();
    Dataset<Row> stats = docs.selectExpr("doc_id", "status", "'cuda' as backend",
            "concat('NVIDIA H200 (cuda:', cast(id % 4 % 2 as string), ')') as device", "policy",
            "if(status = 'ok', input_tokens, null) as input_tokens",
            "if(status = 'ok', output_tokens, null) as output_tokens",
            // dense prefill grows quadratically; the sparse policies stay near linear
            "if(status = 'ok', slow * (1 + 0.2 * r) * (input_tokens * 0.02 + if(policy = '" + DENSE
                + "', input_tokens * 4e-6 * input_tokens, input_tokens * 0.01)), null) as prefill_ms",
            "if(status = 'ok', slow * (output_tokens - 1) * (8 + input_tokens / if(policy = '" + DENSE
                + "', 4000.0, 30000.0)), null) as decode_ms",
            "executor_id", "partition_id", "r")
        .selectExpr("*", "prefill_ms + 3 as ttft_ms", "prefill_ms + decode_ms + 5 as total_ms",
            "if(policy = '" + DENSE + "', null, transform(sequence(0, " + (LAYERS - 1) + "), l -> cast(if(l < 2, 1.0,"
                + " 0.08 + 0.25 * abs(sin(l * 0.7)) + 0.05 * r) as float))) as selected_fraction_by_layer",
            "if(policy = '" + DENSE + "', null, 0.55 + 0.35 * r) as selection_cache_hit_rate",
            "cast(input_tokens as long) * " + (LAYERS * 2 * 2 * 64 * 2) + " as kv_bytes_before",
            "if(policy = '" + SELKV + "', 0.25, 1.0) as kv_ratio",
            "if(policy = '" + DENSE + "', 0, " + (LAYERS - 2) + ") as sparse_layers")
        .selectExpr("doc_id", "status", "backend", "device", "policy",
            "if(status = 'ok', policy, null) as policy_resolved", "input_tokens", "output_tokens", "ttft_ms",
            "prefill_ms", "decode_ms", "total_ms", "executor_id", "partition_id",
            "if(policy = '" + DENSE + "', cast(input_tokens as double), input_tokens * 0.2) as attended_tokens_mean",
            "selected_fraction_by_layer", "selection_cache_hit_rate", "kv_bytes_before",
            "cast(kv_bytes_before * kv_ratio as long) as kv_bytes_after", "sparse_layers",
            "if(policy = '" + DENSE + "', 0.0, decode_ms * 0.1) as selection_ms", "decode_ms * 0.3 as attention_ms",
            "if(status = 'ok', 1.0 + partition_id % 4, null) as decode_batch_mean",
            // a third of the documents are further questions over a document another one prefilled
            "if(status = 'ok', if(r < 0.33, cast(input_tokens * 0.9 as int), 0), null) as prefix_tokens_reused",
            "if(status = 'ok', 'preset:summary', null) as prompt_source", "if(status = 'ok', 256, null) as max_new_tokens",
            "if(status = 'ok', 0.0, null) as temperature", "if(status = 'ok', 1.0, null) as top_p",
            "if(status = 'ok', 0L, null) as seed", "if(status = 'ok', array(), null) as stop");
    Dataset<Row> outputs = docs.selectExpr("doc_id", "if(id % 2 = 0, 'summary', 'qa') as task", "status", "error",
        "if(status = 'ok', concat('answer for ', doc_id), null) as output",
        "if(status = 'ok', input_tokens, null) as input_tokens",
        "if(status = 'ok', output_tokens, null) as output_tokens",
        "if(status = 'ok', 'eos', null) as finish_reason", "cast(null as string) as reference",
        "cast(null as string) as notes", "concat('docs.jsonl:', id + 1) as source");
    conform(stats, JobSchemas.STATS_COLUMNS, runId).write().mode("append").partitionBy("run_id")
        .parquet(out.resolve("stats").toString());
    conform(outputs, JobSchemas.OUTPUT_COLUMNS, runId).write().mode("append").partitionBy("run_id")
        .parquet(out.resolve("outputs").toString());
    docs.unpersist();
    Files.createDirectories(out.resolve("runs"));
    Files.writeString(out.resolve("runs").resolve(runId + ".json"), """
        {"run_id": "%s", "start": "2026-11-29T08:00:00Z", "seconds": %s, "rows": %d,
         "model": "/models/llama-3.1-8b-instruct", "policy": "per document", "backend": "cuda",
         "devices": ["NVIDIA H200 (cuda:0)", "NVIDIA H200 (cuda:1)"], "options": {"maxNewTokens": 256}}
        """.formatted(runId, wallMs / 1000, documents));
  }

  /** The job's columns, in its order and with its types ({@link JobSchemas#RESULT}), plus the run_id partition. */
  private static Dataset<Row> conform(Dataset<Row> df, List<String> columns, String runId) {
    List<Column> select = new ArrayList<>();
    for (String c : columns) {
      Column value = c.equals("run_id") ? lit(runId) : col(c);
      select.add(value.cast(RunReport.nullable(JobSchemas.RESULT.apply(c).dataType())).as(c));
    }
    return df.select(select.toArray(Column[]::new));
  }

  /** Accuracy per task × length × policy for {@code runId}, where and as {@code longsieve eval} writes it. */
  static void writeEval(SparkSession spark, Path out, String runId) {
    spark.range(3 * 2 * 4).selectExpr(
            "'" + runId + "' as run_id",
            "if(id % 2 = 0, 'needle', 'qa') as task",
            "cast(pow(2, 12 + cast(id / 6 as int) * 2) as int) as length",
            "case cast(id / 2 as int) % 3 when 0 then '" + DENSE + "' when 1 then '" + TOKENSELECT + "' else '"
                + SELKV + "' end as policy",
            "greatest(0.0, 0.95 - (id % 6) * 0.04 - cast(id / 6 as int) * 0.05) as accuracy",
            "if(cast(id / 2 as int) % 3 = 0, 1.0, 0.2) as attended_fraction",
            "100.0 + id * 10 as ms_per_doc", "20 as n_docs", "0 as n_errors")
        .write().mode("append").partitionBy("run_id").parquet(out.resolve("eval").resolve("results").toString());
  }
}
