package io.longsieve.job;

import static org.apache.spark.sql.functions.broadcast;
import static org.apache.spark.sql.functions.coalesce;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.concat;
import static org.apache.spark.sql.functions.count;
import static org.apache.spark.sql.functions.expr;
import static org.apache.spark.sql.functions.first;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.min;
import static org.apache.spark.sql.functions.monotonically_increasing_id;
import static org.apache.spark.sql.functions.row_number;
import static org.apache.spark.sql.functions.struct;
import static org.apache.spark.sql.functions.sum;
import static org.apache.spark.sql.functions.to_json;
import static org.apache.spark.sql.functions.trim;
import static org.apache.spark.sql.functions.when;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Arrays;
import java.util.Locale;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.function.MapFunction;
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
 * executors read and parse the data; the driver only plans (and collects one small count per input
 * block to number the lines).
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
    Dataset<Row> lines = format(spark, input) == Format.PARQUET ? parquetRows(spark, input) : jsonlLines(spark, input);
    Dataset<Row> parsed = lines.map((MapFunction<Row, Row>) r -> DocumentParser.parse(
        r.getString(0), r.isNullAt(1) || r.getBoolean(1), r.getString(2), r.getString(3), r.getLong(4)),
        Encoders.row(JobSchemas.PARSED));
    return markDuplicates(parsed);
  }

  /**
   * JSONL or Parquet: by extension (.parquet; .jsonl, .json, .ndjson, also compressed), else by the
   * first file's magic bytes ("PAR1"). A folder is judged by its first data file.
   */
  public static Format format(SparkSession spark, String input) {
    try {
      Path p = new Path(input);
      FileSystem fs = p.getFileSystem(spark.sparkContext().hadoopConfiguration());
      if (!fs.exists(p)) throw new IllegalArgumentException("input " + input + " does not exist");
      Path file = p;
      if (fs.getFileStatus(p).isDirectory()) {
        FileStatus[] files = fs.listStatus(p, f -> !f.getName().startsWith(".") && !f.getName().startsWith("_"));
        file = Arrays.stream(files).filter(FileStatus::isFile).map(FileStatus::getPath).sorted().findFirst()
            .orElseThrow(() -> new IllegalArgumentException("input folder " + input + " holds no data files"));
      }
      String name = file.getName().toLowerCase(Locale.ROOT);
      if (name.endsWith(".parquet")) return Format.PARQUET;
      if (name.matches(".*\\.(jsonl|json|ndjson)(\\.(gz|bz2|zst|lz4|snappy|deflate))?")) return Format.JSONL;
      try (InputStream in = fs.open(file)) {
        byte[] magic = in.readNBytes(4);
        return Arrays.equals(magic, "PAR1".getBytes(java.nio.charset.StandardCharsets.US_ASCII))
            ? Format.PARQUET : Format.JSONL;
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read input " + input + ": " + e.getMessage(), e);
    }
  }

  /** {@link JobSchemas#LINE} rows of a JSONL file or folder, numbered per file from 1. */
  static Dataset<Row> jsonlLines(SparkSession spark, String input) {
    Dataset<Row> raw = spark.read().format("text").load(input).select(
        col("value"),
        expr("is_valid_utf8(value)").as("valid_utf8"),
        col("_metadata.file_name").as("file_name"),
        col("_metadata.file_path").as("file_path"),
        col("_metadata.file_block_start").as("block_start"),
        monotonically_increasing_id().as("seq"));
    // A block (file split) is read in order by one task, so its lines have consecutive seq values.
    // Line = lines in the file's earlier blocks + position in the block: one small row per block.
    WindowSpec earlier = Window.partitionBy("file_path").orderBy("block_start")
        .rowsBetween(Window.unboundedPreceding(), -1);
    Dataset<Row> blocks = raw.groupBy("file_path", "block_start")
        .agg(count(lit(1)).as("n"), min("seq").as("first_seq"))
        .withColumn("lines_before", coalesce(sum("n").over(earlier), lit(0L)))
        .select("file_path", "block_start", "first_seq", "lines_before");
    return raw.join(broadcast(blocks), new String[] {"file_path", "block_start"})
        .withColumn("line", col("lines_before").plus(col("seq")).minus(col("first_seq")).plus(1))
        .filter(trim(col("value")).notEqual(""))
        .select("value", "valid_utf8", "file_name", "file_path", "line");
  }

  /**
   * {@link JobSchemas#LINE} rows of a Parquet file or folder: each row as a JSON object (null fields
   * left out), so Parquet rows go through the same checks as JSONL lines.
   */
  static Dataset<Row> parquetRows(SparkSession spark, String input) {
    Dataset<Row> df = spark.read().parquet(input);
    Column[] fields = Arrays.stream(df.columns()).map(c -> col("`" + c + "`")).toArray(Column[]::new);
    return df.select(
        to_json(struct(fields)).as("value"),
        lit(true).as("valid_utf8"),
        col("_metadata.file_name").as("file_name"),
        col("_metadata.file_path").as("file_path"),
        col("_metadata.row_index").plus(1).as("line"));
  }

  /** The first row (by file, then line) of each doc_id keeps it; the later ones are duplicate_id. */
  static Dataset<Row> markDuplicates(Dataset<Row> parsed) {
    WindowSpec byId = Window.partitionBy("doc_id").orderBy("file_path", "line");
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
