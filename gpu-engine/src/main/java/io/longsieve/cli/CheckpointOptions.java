package io.longsieve.cli;

import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * The checkpoint and CPU thread options that {@code generate} and {@code profile} share, declared
 * once so their names, defaults and help stay the same. ({@code eval-engine}'s EvalOptions has the
 * same two but lives in the eval package, which may not import cli.)
 */
final class CheckpointOptions {

  @Option(names = "--model", required = true, description = "Hugging Face checkpoint folder.")
  Path model;

  @Option(names = "--threads", defaultValue = "0", description = "CPU threads; 0 = all cores.")
  int threads;
}
