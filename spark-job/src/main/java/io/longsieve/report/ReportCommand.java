package io.longsieve.report;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

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

  @Spec
  CommandSpec spec;

  /**
   * Writes the report; what is wrong (no run there, an output that cannot be read) is one line on stderr
   * and exit 2 (JobCli's handlers give any other failure one line and exit 1). A run whose manifest is
   * missing or torn still gets its report, from the tables, with one line saying so.
   */
  @Override
  public Integer call() throws Exception {
    PrintWriter err = spec.commandLine().getErr();
    String uri = output.contains("://") ? output : Path.of(output).toAbsolutePath().toUri().toString();
    SparkSession.Builder builder = SparkSession.builder().appName("longsieve-report")
        .config("spark.ui.enabled", "false");
    if (System.getProperty("spark.master") == null) {
      builder.master(master);
    }
    boolean ownSession = SparkSession.getActiveSession().isEmpty() && SparkSession.getDefaultSession().isEmpty();
    SparkSession spark = builder.getOrCreate();
    try {
      org.apache.hadoop.conf.Configuration conf = spark.sparkContext().hadoopConfiguration();
      String id = runId;
      try {
        if (id == null) {
          id = RunReport.newestRunId(conf, uri).orElse(null);
          if (id == null) {
            err.println("longsieve report: no runs under " + output + " (expected runs/<run_id>.json or stats/run_id=...)");
            return 2;
          }
        }
        RunReport.requireRun(conf, new org.apache.hadoop.fs.Path(uri), id);
      } catch (java.io.IOException e) {
        // a mistyped run id or output is a usage error: one line, exit 2, no stack trace
        err.println("longsieve report: " + e.getMessage());
        return 2;
      }
      ManifestFields manifest = ManifestFields.read(conf, new org.apache.hadoop.fs.Path(uri), id);
      if (manifest.torn() != null) {
        err.println("longsieve report: " + manifest.torn() + "; the report is made from the tables (outputs, stats) alone");
      } else if (manifest.fields().isEmpty()) {
        err.println("longsieve report: no manifest runs/" + id + ".json (the run did not finish, or is still running); "
            + "the report is made from the tables (outputs, stats) alone");
      }
      spec.commandLine().getOut().println(RunReport.write(spark, uri, id));
      return 0;
    } finally {
      if (ownSession) spark.stop();
    }
  }
}
