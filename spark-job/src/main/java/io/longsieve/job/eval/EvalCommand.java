package io.longsieve.job.eval;

import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.eval.DocResult;
import io.longsieve.eval.EvalOptions;
import io.longsieve.eval.EvalRow;
import io.longsieve.eval.EvalRunner;
import io.longsieve.eval.EvalSession;
import io.longsieve.eval.SuiteItem;
import io.longsieve.eval.SuiteJsonl;
import java.nio.file.Files;
import java.util.List;
import java.util.concurrent.Callable;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code longsieve eval}: the quality suite with Parquet results. By default every policy runs
 * through the Spark job (the suite file is the job's input); {@code --engine} runs the documents
 * through the engine in this JVM instead (Spark only writes the Parquet). Writes under
 * {@code <output>/eval/}: suite.jsonl, docs.jsonl, results.jsonl, results.md and the Parquet
 * table results/ (run_id, task, length, policy, accuracy, attended_fraction, ms_per_doc, n_docs,
 * n_errors, kl_mean, kl_max, top1_agreement, attention_recall: fidelity against dense attention, measured with
 * --engine and null through the job).
 */
@Command(name = "eval", mixinStandardHelpOptions = true,
    description = "Run the quality suite (accuracy per task x length x policy); results as Parquet and Markdown.")
public final class EvalCommand implements Callable<Integer> {

  @Mixin
  EvalOptions options;

  @Option(names = "--master", defaultValue = "local[*]", description = "Spark master (default: ${DEFAULT-VALUE}).")
  String master;

  @Option(names = "--engine", description = "Run documents through the engine in this JVM, not the Spark job.")
  boolean engineOnly;

  @Override
  public Integer call() throws Exception {
    EvalOptions o = options;
    List<String> policies = o.policyList();
    EvalRunner.parse(policies); // fail before Spark starts
    List<DocResult> docs;
    List<SuiteItem> suite;
    SparkSession spark = SparkSession.builder().appName("longsieve eval " + o.runId).master(master)
        .config("spark.ui.enabled", "false").getOrCreate();
    try {
      if (engineOnly) {
        EvalSession.Outcome out = EvalSession.run(o, System.err);
        suite = out.suite();
        docs = out.docs();
      } else {
        Files.createDirectories(o.evalDir());
        try (LoadedModel m = LoadedModel.load(o.model)) {
          suite = EvalSession.suite(o, m.tokenizer());
        }
        SuiteJsonl.write(suite, o.evalDir().resolve("suite.jsonl"));
        System.err.printf("eval: %d documents x %d policies through the Spark job (%s)%n", suite.size(), policies.size(), master);
        docs = o.writeSuiteOnly ? List.of() : JobEval.run(spark, o, suite, policies, master);
      }
      if (docs.isEmpty()) return 0;
      List<EvalRow> rows = EvalRunner.aggregate(o.runId, docs);
      EvalSession.write(o.evalDir(), docs, rows, (engineOnly ? "engine" : "Spark job, " + master) + ", " + EvalSession.familyLabel(o), o.model);
      EvalParquet.write(spark, rows, o.evalDir().resolve("results").toString());
      System.out.print(Files.readString(o.evalDir().resolve("results.md")));
      return 0;
    } finally {
      spark.stop();
    }
  }
}
