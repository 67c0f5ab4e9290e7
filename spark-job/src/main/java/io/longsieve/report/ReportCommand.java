package io.longsieve.report;

import java.nio.file.Path;
import java.util.concurrent.Callable;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code longsieve report}: (re)writes the HTML report of a run that is already on disk. */
@Command(name = "report", mixinStandardHelpOptions = true,
    description = "Write the self-contained HTML report of a run to <output>/report/<run_id>.html.")
public final class ReportCommand implements Callable<Integer> {

  @Option(names = "--output", required = true,
      description = "The job's output directory (holds stats/, outputs/, runs/); a path or a Hadoop URI.")
  String output;

  @Option(names = "--run-id", description = "Run to report on (default: the newest run under --output).")
  String runId;

  @Option(names = "--master", defaultValue = "local[*]",
      description = "Spark master when none is configured (default: ${DEFAULT-VALUE}).")
  String master;

  @Override
  public Integer call() throws Exception {
    String uri = output.contains("://") ? output : Path.of(output).toAbsolutePath().toUri().toString();
    SparkSession.Builder builder = SparkSession.builder().appName("longsieve-report")
        .config("spark.ui.enabled", "false");
    if (System.getProperty("spark.master") == null) {
      builder.master(master);
    }
    SparkSession spark = builder.getOrCreate();
    try {
      String id = runId;
      if (id == null) {
        id = RunReport.newestRunId(spark.sparkContext().hadoopConfiguration(), uri).orElse(null);
        if (id == null) {
          System.err.println("longsieve report: no runs under " + output + " (expected runs/<run_id>.json or stats/run_id=...)");
          return 2;
        }
      }
      try {
        RunReport.requireRun(spark.sparkContext().hadoopConfiguration(), new org.apache.hadoop.fs.Path(uri), id);
      } catch (java.io.IOException e) {
        // a mistyped run id is a usage error: one line, exit 2, no stack trace
        System.err.println("longsieve report: " + e.getMessage());
        return 2;
      }
      System.out.println(RunReport.write(spark, uri, id));
      return 0;
    } finally {
      spark.stop();
    }
  }
}
