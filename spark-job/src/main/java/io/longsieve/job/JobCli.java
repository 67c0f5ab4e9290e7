package io.longsieve.job;

import io.longsieve.cli.GenerateCommand;
import io.longsieve.cli.OneLineErrors;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine;

/**
 * {@code longsieve}: the main class of bin/longsieve (all but the engine-only commands) and of
 * spark-submit. Each subcommand is one line in the list below.
 */
@Command(name = "longsieve", mixinStandardHelpOptions = true,
    versionProvider = JobCli.Version.class,
    subcommands = {
        RunCommand.class,
        io.longsieve.report.ReportCommand.class,
        GenerateCommand.class,
        io.longsieve.job.eval.EvalCommand.class,
    },
    description = "LongSieve: long-document LLM inference as a Spark batch job.",
    footer = {"", "Engine commands without Spark (bin/longsieve runs them; each has --help):",
        "  generate     Generate text for one prompt with the engine alone.",
        "  bench        Benchmark the engine's prefill and decode.",
        "  profile      Time the engine's steps on one document.",
        "  eval-engine  Run the quality suite on the engine alone.",
        "  inspect      What the engine reads from a checkpoint and whether it fits a GPU (docs/models.md)."})
public final class JobCli implements Callable<Integer> {

  public static void main(String[] args) {
    quietSparkLogging();
    System.exit(commandLine().execute(args));
  }

  /**
   * The command line: every error ends in one line on stderr ({@link OneLineErrors}: exit 2 for an
   * argument or user error, 1 for the unexpected; {@code run} has its own codes for faults), the stack
   * trace in the log.
   */
  public static CommandLine commandLine() {
    CommandLine cl = new CommandLine(new JobCli());
    RunCommand.addKeyList(cl.getSubcommands().get("run"));
    return OneLineErrors.install(cl, e -> RunCommand.FAILURES.error("longsieve failed", e));
  }

  /** No subcommand: show the usage and fail, so a script with a typo does not pass silently. */
  @Override
  public Integer call() {
    commandLine().usage(System.err);
    return 2;
  }

  /**
   * Run by hand, Spark's INFO log drowns the job's own lines; use the bundled log4j2 file unless a
   * configuration was given (spark-submit and clusters keep theirs). Must run before Spark loads.
   */
  static void quietSparkLogging() {
    if (System.getProperty("spark.submit.deployMode") != null) return;
    if (System.getProperty("log4j2.configurationFile") != null || System.getProperty("log4j.configurationFile") != null) {
      return;
    }
    System.setProperty(LOG_FILE_PROPERTY, logFile().toString());
    System.setProperty("log4j2.configurationFile", "longsieve-log4j2.properties");
  }

  /** The system property naming the full log (longsieve-log4j2.properties writes it; failures point at it). */
  static final String LOG_FILE_PROPERTY = "longsieve.logFile";

  /**
   * This process's full log: {@code <longsieve.home>/.cache/logs/longsieve-<UTC time>-<pid>.log} under
   * bin/longsieve, else in the temporary folder. stderr has LongSieve's own lines; Spark's and the
   * stack traces go here.
   */
  static java.nio.file.Path logFile() {
    String home = System.getProperty("longsieve.home");
    java.nio.file.Path dir = home != null && !home.isBlank() ? java.nio.file.Path.of(home, ".cache", "logs")
        : java.nio.file.Path.of(System.getProperty("java.io.tmpdir"));
    String time = java.time.format.DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'").withZone(java.time.ZoneOffset.UTC)
        .format(java.time.Instant.now());
    return dir.resolve("longsieve-" + time + "-" + ProcessHandle.current().pid() + ".log");
  }

  /** --version: LongSieve's version. */
  static final class Version implements CommandLine.IVersionProvider {
    @Override
    public String[] getVersion() {
      return new String[] {"longsieve " + RunManifest.longsieveVersion()};
    }
  }
}
