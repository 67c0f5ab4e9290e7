package io.longsieve.cli;

import io.longsieve.eval.EvalOptions;
import io.longsieve.eval.EvalSession;
import java.nio.file.Files;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;

/**
 * {@code longsieve eval-engine}: the quality suite through the engine alone (no Spark), for GPU
 * hosts that carry only the engine bundle. Writes suite.jsonl, docs.jsonl, results.jsonl and
 * results.md under {@code <output>/eval/}; the Spark job's {@code eval} adds Parquet.
 */
@Command(name = "eval-engine", mixinStandardHelpOptions = true,
    description = "Run the quality suite (accuracy per task x length x policy) with the engine alone.")
public final class EvalEngineCommand implements Callable<Integer> {

  @Mixin
  EvalOptions options;

  @Override
  public Integer call() throws Exception {
    EvalSession.Outcome out = EvalSession.run(options, System.err);
    if (!out.rows().isEmpty()) System.out.print(Files.readString(options.evalDir().resolve("results.md")));
    return 0;
  }
}
