package io.longsieve.cli;

import io.longsieve.model.CheckpointException;
import java.util.logging.Level;
import java.util.logging.Logger;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * Entry point of the engine's own commands, which need no Spark and so also run from the portable
 * bundle on a GPU host: {@code generate}, {@code profile}, {@code eval-engine}, {@code inspect}. {@code bench} is not
 * here: the benchmarks are a module of their own (gpu-bench, io.longsieve.bench.BenchCli), outside
 * the engine's jar.
 */
@Command(name = "longsieve-engine", mixinStandardHelpOptions = true,
    subcommands = {GenerateCommand.class, ProfileCommand.class, EvalEngineCommand.class, InspectCommand.class},
    description = "LongSieve engine commands (no Spark).")
public final class EngineCli {

  private static final Logger LOG = Logger.getLogger(EngineCli.class.getName());

  public static void main(String[] args) {
    OneLineLogFormat.install(); // the job's one-line log format, not JUL's two lines per record
    System.exit(commandLine().execute(args));
  }

  /**
   * The launcher's name in usage lines: bin/longsieve passes -Dlongsieve.program=longsieve. What a
   * user can fix (a bad argument, a missing file, a device this build or machine cannot use: an
   * IllegalArgumentException or IllegalStateException; a checkpoint the engine cannot read, such as a
   * GPTQ one: a CheckpointException) is one line on stderr and exit code 2, as {@code run} does; its stack trace goes to the log at FINE. Anything else keeps picocli's trace.
   */
  public static CommandLine commandLine() {
    CommandLine cl = new CommandLine(new EngineCli()).setCommandName(System.getProperty("longsieve.program",
        "longsieve-engine"));
    cl.setExecutionExceptionHandler((e, cmd, parsed) -> {
      if (!(e instanceof IllegalArgumentException || e instanceof IllegalStateException
          || e instanceof CheckpointException)) {
        throw e;
      }
      String message = String.valueOf(e.getMessage()).lines().findFirst().orElse("");
      cmd.getErr().println(cmd.getCommandSpec().qualifiedName() + ": " + message);
      LOG.log(Level.FINE, "the trace of: " + message, e);
      return 2;
    });
    return cl;
  }
}
