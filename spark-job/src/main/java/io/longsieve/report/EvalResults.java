package io.longsieve.report;

import static org.apache.spark.sql.functions.col;

import io.longsieve.report.RunAggregates.EvalRow;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * The eval's accuracy table (run_id, task, length, policy, accuracy, attended_fraction, ms_per_doc, ...), Parquet
 * partitioned by run_id, as {@code longsieve eval} writes it to {@code <output>/eval/results}. The eval runs the job
 * once per policy with run ids {@code <eval run>-p<i>} under {@code <output>/eval/job}, so a report on one of those
 * runs finds its eval at {@code ../../eval/results}.
 */
final class EvalResults {

  private EvalResults() {}

  /**
   * Eval rows for {@code runId}: the eval run of that id, else the eval run it belongs to ({@code <eval>-p<i>}), else
   * the most recently written eval run; null when there is no eval table.
   */
  static RunAggregates.Eval read(SparkSession spark, Path out, String runId) throws IOException {
    FileSystem fs = out.getFileSystem(spark.sparkContext().hadoopConfiguration());
    List<Path> candidates = List.of(new Path(new Path(out, "eval"), "results"), new Path(out, "eval"),
        new Path(out.getParent() == null ? out : out.getParent(), "results"));
    for (Path table : candidates) {
      if (!fs.isDirectory(table)) {
        continue;
      }
      FileStatus[] parts = fs.listStatus(table, p -> p.getName().startsWith("run_id="));
      Optional<String> chosen = choose(parts, runId);
      if (chosen.isPresent()) {
        return new RunAggregates.Eval(chosen.get(), rows(spark, table, chosen.get()));
      }
    }
    return null;
  }

  static Optional<String> choose(FileStatus[] partitions, String runId) {
    List<String> ids = Arrays.stream(partitions).map(s -> s.getPath().getName().substring("run_id=".length())).toList();
    if (ids.contains(runId)) {
      return Optional.of(runId);
    }
    Optional<String> parent = ids.stream().filter(e -> runId.matches(java.util.regex.Pattern.quote(e) + "-p\\d+"))
        .findFirst();
    if (parent.isPresent()) {
      return parent;
    }
    return Arrays.stream(partitions).max(Comparator.comparingLong(FileStatus::getModificationTime))
        .map(s -> s.getPath().getName().substring("run_id=".length()));
  }

  private static List<EvalRow> rows(SparkSession spark, Path table, String evalRunId) {
    List<EvalRow> rows = new ArrayList<>();
    for (Row r : spark.read().option("basePath", table.toString())
        .parquet(new Path(table, "run_id=" + evalRunId).toString())
        .select(col("task").cast("string"), col("length").cast("long"), col("policy").cast("string"),
            col("accuracy").cast("double"), col("attended_fraction").cast("double"), col("ms_per_doc").cast("double"))
        .limit(5000).collectAsList()) {
      rows.add(new EvalRow(RunAggregator.str(r, 0), RunAggregator.lng(r, 1), RunAggregator.str(r, 2),
          RunAggregator.dbl(r, 3), RunAggregator.dbl(r, 4), RunAggregator.dbl(r, 5)));
    }
    return rows;
  }
}
