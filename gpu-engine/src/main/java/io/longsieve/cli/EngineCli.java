package io.longsieve.cli;

import picocli.CommandLine.Command;
import picocli.CommandLine;

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

  public static void main(String[] args) {
    System.exit(commandLine().execute(args));
  }

  /** The launcher's name in usage lines: bin/longsieve passes -Dlongsieve.program=longsieve. */
  public static CommandLine commandLine() {
    return new CommandLine(new EngineCli()).setCommandName(System.getProperty("longsieve.program", "longsieve-engine"));
  }
}
