package io.longsieve.cli;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * Entry point of the engine's own commands, which need no Spark and so also run from the portable
 * bundle on a GPU host: {@code generate} (and, as they land, {@code bench}, {@code profile}).
 */
@Command(name = "longsieve-engine", mixinStandardHelpOptions = true,
    subcommands = {GenerateCommand.class, ProfileCommand.class, EvalEngineCommand.class},
    description = "LongSieve engine commands (no Spark).")
public final class EngineCli {

  public static void main(String[] args) {
    System.exit(commandLine().execute(args));
  }

  public static CommandLine commandLine() {
    return new CommandLine(new EngineCli());
  }
}
