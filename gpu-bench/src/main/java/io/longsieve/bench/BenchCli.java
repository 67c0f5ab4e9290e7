package io.longsieve.bench;

import picocli.CommandLine;

/**
 * Entry point of {@code longsieve bench} ({@link BenchCommand}): bin/longsieve and the bundle's
 * longsieve-gpu run {@code bench ...} here. The benchmarks live in this module, outside the engine's
 * jar and fatbin, so the product carries none of their kernels, fills or tuning hooks.
 */
public final class BenchCli {
  private BenchCli() {}

  public static void main(String[] args) {
    io.longsieve.cli.OneLineLogFormat.install(); // the engine commands' one-line log format
    System.exit(new CommandLine(new BenchCommand()).execute(args));
  }
}
