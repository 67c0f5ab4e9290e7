package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.struct;
import static org.apache.spark.sql.functions.to_json;

import java.util.Arrays;
import java.util.Set;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;

/**
 * The job as a library: a DataFrame of documents in, a DataFrame of outputs and stats out.
 * <pre>
 *   Dataset&lt;Row&gt; docs = spark.read().parquet("/data/contracts");   // doc_id, text, question, ...
 *   Dataset&lt;Row&gt; out = LongSieve.generate(docs, LongSieveOptions.builder()
 *       .model("/models/Llama-3.1-8B-Instruct").promptTemplate("List the parties of {text}").build());
 *   out.select("doc_id", "status", "output", "total_ms").write().parquet("/data/contracts-parties");
 * </pre>
 * The input's columns are those of {@code longsieve run}'s rows (docs/input.md): {@code doc_id},
 * {@code task} or {@code prompt}, {@code text} or {@code documents}, {@code question}, {@code system},
 * the sampling columns, and any other column a template names. The result has one row per input row,
 * {@link JobSchemas#RESULT}: the outputs table's columns and the stats table's together, and with
 * {@code typedOutput} the {@code answer} column typed from the run's JSON schema ({@link AnswerColumn}).
 *
 * <p>Failure semantics, as in {@code longsieve run} (it is this code): a bad row (a missing field, a
 * template placeholder the row has no value for) is a {@code bad_input} row, a repeated doc_id a
 * {@code duplicate_id} row, a prompt over the context {@code too_long}, out of memory after retries
 * {@code oom}, a failed generation {@code engine_error}: never a failed job, never a dropped row. A
 * sticky CUDA error ends the executor (exit 45) and Spark retries its task elsewhere; outputs are the
 * same on a retry (greedy, or sampled with a seed). What is wrong with the call as a whole (an option,
 * the model, the policy, the run template or a placeholder that is not a column of {@code docs}) throws
 * IllegalArgumentException here, before any Spark job.
 *
 * <p>Placement, batching and GPUs, as in the job: documents are placed by estimated cost (one pass over
 * doc_id and size at the call, to plan), each executor opens one engine that its concurrent tasks share
 * and batch, and a task is bound to the GPU Spark assigned it (stage-level scheduling with
 * {@code inferenceGpuAmount}). The result is lazy: each action on it runs the model again, so write
 * it or persist it once. {@code longsieve run} calls {@link #stage} after reading its files and
 * adds what a run over files has: resume, budgets, commit slices, the manifest and report.
 *
 * <p>For py4j: every argument is a Dataset or a LongSieveOptions built from a {@code java.util.Map}
 * of strings ({@link LongSieveOptions#fromMap}).
 */
public final class LongSieve {
  private LongSieve() {}

  /** Source of the rows in messages and generated ids: {@code dataframe:<row number>}. */
  static final String SOURCE = "dataframe";

  /**
   * Runs the model over {@code docs}.
   *
   * @throws IllegalArgumentException one line: a bad option, model or policy, or a run template whose
   *     placeholder is not a column of {@code docs}
   */
  public static Dataset<Row> generate(Dataset<Row> docs, LongSieveOptions options) {
    SparkSession spark = docs.sparkSession();
    RunOptions o = options.runOptions(spark.sparkContext().master());
    PromptTemplate template = o.generation().promptTemplate();
    if (template != null) checkColumns(template, docs.schema());
    ModelCheck.check(o);
    Dataset<Row> parsed = InputReader.parse(lines(docs), template);
    GenerationStage.Stage stage = stage(spark, parsed, o, JobMetrics.register(spark.sparkContext()));
    Dataset<Row> results = spark.createDataFrame(stage.results(), JobSchemas.RESULT);
    return o.generation().typedOutput() ? AnswerColumn.add(results, o.generation().jsonSchema()) : results;
  }

  /** The same with options from a map of strings, for callers without the builder (py4j, SQL-minded Scala). */
  public static Dataset<Row> generate(Dataset<Row> docs, java.util.Map<String, String> options) {
    return generate(docs, LongSieveOptions.fromMap(options));
  }

  /**
   * The generation stage over PARSED rows, shared by this API and {@code longsieve run}: the cost plan,
   * the partitioner and one {@link DocumentProcessor} per partition ({@link GenerationStage}).
   */
  static GenerationStage.Stage stage(SparkSession spark, Dataset<Row> parsed, RunOptions o, JobMetrics metrics) {
    return GenerationStage.build(spark, parsed, o, metrics);
  }

  /**
   * A run-level template may name only what the rows can have: a column of the DataFrame (its schema
   * is known here, unlike a JSONL file's). A row whose value is null there is still a bad_input row.
   */
  static void checkColumns(PromptTemplate t, StructType schema) {
    checkColumns(t, Set.of(schema.fieldNames()));
  }

  /** The same for a Parquet input's columns ({@code longsieve run} checks them before Spark starts). */
  static void checkColumns(PromptTemplate t, Set<String> columns) {
    for (String name : t.placeholders()) {
      if (!columns.contains(name)) {
        throw new IllegalArgumentException("the prompt template's {" + name + "} is not a column of the DataFrame (columns: "
            + String.join(", ", new java.util.TreeSet<>(columns)) + ")");
      }
    }
  }

  /**
   * Each row as {@link JobSchemas#LINE}: its JSON (null fields left out, as for Parquet input), so a
   * DataFrame's rows go through the parser's checks like a file's lines; numbered from 1 in the
   * DataFrame's order.
   */
  static Dataset<Row> lines(Dataset<Row> docs) {
    Column[] fields = Arrays.stream(docs.columns()).map(c -> col("`" + c + "`")).toArray(Column[]::new);
    JavaRDD<Row> numbered = docs.select(to_json(struct(fields)).as("value")).javaRDD().zipWithIndex()
        .map(t -> RowFactory.create(t._1().getString(0), true, SOURCE, SOURCE, t._2() + 1));
    return docs.sparkSession().createDataFrame(numbered, JobSchemas.LINE);
  }
}
