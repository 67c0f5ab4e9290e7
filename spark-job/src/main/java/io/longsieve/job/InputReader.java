package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.concat;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.expr;
import static org.apache.spark.sql.functions.first;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.row_number;
import static org.apache.spark.sql.functions.struct;
import static org.apache.spark.sql.functions.to_json;
import static org.apache.spark.sql.functions.trim;
import static org.apache.spark.sql.functions.when;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.expressions.Window;
import org.apache.spark.sql.expressions.WindowSpec;

/**
 * Reads the input into {@link JobSchemas#PARSED} rows, one per input line (JSONL) or row (Parquet),
 * with bad rows marked bad_input and the later rows of a repeated doc_id marked duplicate_id. The
 * executors read and parse the data; the driver only plans (and, for files large enough to be split,
 * collects one small count per block to number the lines).
 *
 * <p>JSONL is read with Spark's text source, which keeps the raw bytes, so invalid UTF-8 is detected
 * ({@code is_valid_utf8}) instead of silently replaced. Blank lines are skipped (they are not rows),
 * but still counted, so line numbers match what an editor shows.
 */
public final class InputReader {
  private InputReader() {}

  public enum Format { JSONL, PARQUET }

  /** The input's rows, parsed, validated and checked for repeated ids. */
  public static Dataset<Row> read(SparkSession spark, String input) {
    return read(spark, InputFiles.list(spark.sparkContext().hadoopConfiguration(), input));
  }

  /** The rows of the listed files (checked on the driver by {@link InputFiles#list}). */
  static Dataset<Row> read(SparkSession spark, InputFiles.Listing files) {
    return read(spark, files, null);
  }

  /** The rows of the listed files, checked against the run's prompt template (null: none). */
  static Dataset<Row> read(SparkSession spark, InputFiles.Listing files, PromptTemplate runTemplate) {
    Dataset<Row> lines = files.format() == Format.PARQUET ? parquetRows(spark, files) : jsonlLines(spark, files);
    return parse(lines, runTemplate);
  }

  /** {@link JobSchemas#LINE} rows to PARSED rows, repeated ids marked. */
  static Dataset<Row> parse(Dataset<Row> lines, PromptTemplate runTemplate) {
    Dataset<Row> parsed = lines.flatMap((FlatMapFunction<Row, Row>) r -> DocumentParser.parse(
        r.getString(0), r.isNullAt(1) || r.getBoolean(1), r.getString(2), r.getString(3), r.getLong(4),
        runTemplate).iterator(), Encoders.row(JobSchemas.PARSED));
    return markDuplicates(parsed);
  }

  /** JSONL or Parquet, see {@link InputFiles#format}; a folder must hold one format. */
  public static Format format(SparkSession spark, String input) {
    return InputFiles.list(spark.sparkContext().hadoopConfiguration(), input).format();
  }

  /**
   * {@link JobSchemas#LINE} rows of a JSONL file or folder, numbered per file from 1. A task reads
   * each of its blocks (file splits) in order, so a line's number is its position in its block plus
   * the lines of the file's earlier blocks. Those counts take one extra pass over the input, needed
   * only when some file is large enough to be split.
   */
  static Dataset<Row> jsonlLines(SparkSession spark, InputFiles.Listing files) {
    Dataset<Row> text = spark.read().format("text").load(files.data().toArray(String[]::new)).select(
        col("value"),
        expr("is_valid_utf8(value)").as("valid_utf8"),
        col("_metadata.file_name").as("file_name"),
        col("_metadata.file_path").as("file_path"),
        col("_metadata.file_block_start").as("block_start"));
    Dataset<Row> raw = checked(spark, text, files); // every pass over the lines, the block counts' too
    Map<String, Long> linesBefore = mayBeSplit(spark, files.largest()) ? linesBeforeEachBlock(raw) : Map.of();
    return raw.mapPartitions(new LineNumberer(linesBefore), Encoders.row(JobSchemas.LINE))
        .filter(trim(col("value")).notEqual(""));
  }

  /** Lines in the earlier blocks of the same file, keyed by {@link LineNumberer#blockKey}; one small row per block. */
  private static Map<String, Long> linesBeforeEachBlock(Dataset<Row> raw) {
    List<Row> blocks = new ArrayList<>(raw.groupBy("file_path", "block_start").agg(count(lit(1)).as("n"))
        .collectAsList());
    blocks.sort(Comparator.comparing((Row b) -> b.getString(0)).thenComparingLong(b -> b.getLong(1)));
    Map<String, Long> before = new HashMap<>();
    String file = null;
    long sum = 0;
    for (Row b : blocks) {
      if (!b.getString(0).equals(file)) {
        file = b.getString(0);
        sum = 0;
      }
      before.put(LineNumberer.blockKey(file, b.getLong(1)), sum);
      sum += b.getLong(2);
    }
    return before;
  }

  /**
   * Whether Spark may split some input file into several blocks: a file no larger than both
   * spark.sql.files.maxPartitionBytes and openCostInBytes is always read whole.
   */
  private static boolean mayBeSplit(SparkSession spark, long largestFile) {
    long whole = Math.min(spark.sessionState().conf().filesMaxPartitionBytes(),
        spark.sessionState().conf().filesOpenCostInBytes());
    return largestFile > whole;
  }

  /**
   * {@link JobSchemas#LINE} rows of a Parquet file or folder: each row as a JSON object (null fields
   * left out), so Parquet rows go through the same checks as JSONL lines.
   */
  static Dataset<Row> parquetRows(SparkSession spark, InputFiles.Listing files) {
    // files may differ in which columns they have (not in their types: InputFiles checked that)
    Dataset<Row> df = spark.read().option("mergeSchema", "true").parquet(files.data().toArray(String[]::new));
    Column[] fields = Arrays.stream(df.columns()).map(c -> col("`" + c + "`")).toArray(Column[]::new);
    return checked(spark, df.select(
        to_json(struct(fields)).as("value"),
        lit(true).as("valid_utf8"),
        col("_metadata.file_name").as("file_name"),
        col("_metadata.file_path").as("file_path"),
        col("_metadata.row_index").plus(1).as("line")), files);
  }

  /**
   * The same rows, each file compared with the driver's snapshot the first time a task reads from it
   * ({@link InputSnapshot.Check}): a file changed or deleted since the plan fails the run naming it.
   * {@code file_name} becomes the file's path below the input folder (a/part.jsonl), for sources and ids.
   */
  private static Dataset<Row> checked(SparkSession spark, Dataset<Row> rows, InputFiles.Listing files) {
    var snapshot = JavaSparkContext.fromSparkContext(spark.sparkContext()).broadcast(files.snapshot());
    return rows.mapPartitions(new InputSnapshot.Check(snapshot, rows.schema()), Encoders.row(rows.schema()));
  }

  /** The first row (by file, then line) of each doc_id keeps it; the later ones are duplicate_id. */
  static Dataset<Row> markDuplicates(Dataset<Row> parsed) {
    WindowSpec byId = Window.partitionBy("doc_id").orderBy("file_path", "line", "source"); // source: the elements of an array line
    Column later = col("occurrence").gt(1);
    return parsed
        .withColumn("occurrence", row_number().over(byId))
        .withColumn("first_source", first("source").over(byId))
        .withColumn("status", when(later, lit(JobSchemas.DUPLICATE_ID)).otherwise(col("status")))
        .withColumn("error", when(later, concat(lit("doc_id '"), col("doc_id"),
            lit("' was already used by the row at "), col("first_source"))).otherwise(col("error")))
        .drop("occurrence", "first_source");
  }
}
