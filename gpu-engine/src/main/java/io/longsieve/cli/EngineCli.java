package io.longsieve.cli;

import java.util.logging.Level;
import java.util.logging.Logger;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * Entry point of the engine's own commands, which need no Spark and so also run from the portable
 * bundle on a GPU host: {@code generate}, {@code profile}, {@code eval-engine}. {@code bench} is not
 * here: the benchmarks are a module of their own (gpu-bench, io.longsieve.bench.BenchCli), outside
 * the engine's jar.
 */
@Command(name = "longsieve-engine", mixinStandardHelpOptions = true,
    subcommands = {GenerateCommand.class, ProfileCommand.class, EvalEngineCommand.class},
    description = "LongSieve engine commands (no Spark).")
public final class EngineCli {

  private static final Logger LOG = Logger.getLogger(EngineCli.class.getName());

  public static void main(String[] args) {
    OneLineLogFormat.install(); // the job's one-line log format, not JUL's two lines per record
    System.exit(commandLine().execute(args));
  }

  /**
   * The launcher's name in usage lines: bin/longsieve passes -Dlongsieve.program=longsieve. Errors end
   * as {@code run}'s do ({@link OneLineErrors}): one line on stderr; exit 2 for an argument error or
   * what a user can fix (a bad checkpoint, option or path, a device this build or machine cannot use),
   * 1 for anything else; the stack trace goes to the log at FINE and, with --debug, to stderr.
   */
  public static CommandLine commandLine() {
    CommandLine cl = new CommandLine(new EngineCli()).setCommandName(System.getProperty("longsieve.program",
        "longsieve-engine"));
    return OneLineErrors.install(cl, e -> LOG.log(Level.FINE, "the trace of: " + OneLineErrors.firstLine(e.getMessage()), e));
  }
}
