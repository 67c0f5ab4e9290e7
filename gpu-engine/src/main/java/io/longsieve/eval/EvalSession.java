package io.longsieve.eval;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.Engine;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.model.Tokenizer;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/**
 * What both eval commands do before their outputs differ: validate the policies, build or read
 * the suite (sized with the model's own tokenizer; from the training family, or with --held-out
 * from the held-out one), run every document under every policy, and
 * write suite.jsonl, docs.jsonl, results.jsonl and results.md under {@code <output>/eval/}.
 */
public final class EvalSession {
  private EvalSession() {}

  /** Result of a session: per-document results and the aggregated rows. */
  public record Outcome(List<SuiteItem> suite, List<DocResult> docs, List<EvalRow> rows) {}

  public static List<SuiteItem> suite(EvalOptions o, Tokenizer tok) {
    if (o.suite != null) return SuiteJsonl.read(o.suite);
    SuiteGenerator gen = new SuiteGenerator(o.heldOut ? SuiteText.loadHeldOut() : SuiteText.load(),
        s -> tok.encode(s, false).length);
    return EvalSuite.generate(gen, o.tasks, o.trainLength, o.lengths, o.perCell, o.seed);
  }

  public static Outcome run(EvalOptions o, PrintStream log) throws java.io.IOException {
    List<String> policies = o.policyList();
    EvalRunner.parse(policies); // fail before the suite is built
    Files.createDirectories(o.evalDir());
    EngineSpec spec = EngineSpec.of(o.model).withDevice(o.device).withThreads(o.threads)
        .withPrefillChunk(o.prefillChunk);
    try (Engine engine = Backends.open(spec)) {
      List<SuiteItem> suite = suite(o, engine.model().tokenizer());
      SuiteJsonl.write(suite, o.evalDir().resolve("suite.jsonl"));
      log.printf(Locale.ROOT, "eval: %d documents x %d policies on %s (%s)%n", suite.size(), policies.size(),
          engine.backend(), engine.device());
      if (o.writeSuiteOnly) return new Outcome(suite, List.of(), List.of());
      EvalRunner runner = new EvalRunner(engine, TaskPrompts.standard(), o.maxNewTokens);
      if (!o.noFidelity) {
        int recall = recallPoints(o, engine.backend());
        log.printf(Locale.ROOT, "eval: fidelity against dense attention (one dense and one teacher-forced run per document"
            + " and policy), attention recall %s%n", recall > 0 ? "at " + recall + " prompt and " + recall
            + " decode positions" : "not measured" + (engine.backend().equals("cpu") ? "" : " (CPU backend only)"));
        runner = runner.withFidelity(recall);
      }
      List<DocResult> docs = runner.run(suite, policies, r -> log.printf(Locale.ROOT,
          "  %-28s %-60s score %.2f  attended %.2f  %6.0f ms%s%s%n", r.item().docId(), r.policy(), r.score(),
          r.attendedFraction(), r.ms(), r.fidelity() == null ? "" : String.format(Locale.ROOT,
              "  kl %.4f  top1 %.2f  recall %.3f", r.fidelity().klMean(), r.fidelity().top1Agreement(),
              r.fidelity().recallMean()), r.error() == null ? "" : "  ERROR " + r.error()));
      List<EvalRow> rows = EvalRunner.aggregate(o.runId, docs);
      write(o.evalDir(), docs, rows, engine.backend() + " " + engine.device() + ", " + familyLabel(o), o.model);
      return new Outcome(suite, docs, rows);
    }
  }

  /**
   * Recall positions per document: --recall-points, or 4 on the CPU and 0 elsewhere when it is -1.
   *
   * @throws IllegalArgumentException when recall is asked of a backend other than the CPU
   */
  static int recallPoints(EvalOptions o, String backend) {
    boolean cpu = backend.equals("cpu");
    if (o.recallPoints < 0) return cpu ? 4 : 0;
    if (o.recallPoints > 0 && !cpu) {
      throw new IllegalArgumentException("--recall-points " + o.recallPoints + ": attention recall is measured on the "
          + "CPU backend only, this run is on " + backend + " (use --recall-points 0, or --device cpu)");
    }
    return o.recallPoints;
  }

  /** Which documents a run measured, for report titles. */
  public static String familyLabel(EvalOptions o) {
    if (o.suite != null) return "suite " + o.suite.getFileName();
    return o.heldOut ? "held-out family (" + SuiteText.HELD_OUT_FILE + ")" : "training family (" + SuiteText.TRAINING_FILE + ")";
  }

  public static void write(Path dir, List<DocResult> docs, List<EvalRow> rows, String where, Path model) throws java.io.IOException {
    EvalReport.writeDocs(docs, dir.resolve("docs.jsonl"));
    EvalReport.writeRows(rows, dir.resolve("results.jsonl"));
    Files.writeString(dir.resolve("results.md"),
        EvalReport.markdown(rows, "Accuracy (%) on " + model.getFileName() + ", " + where)
            + EvalReport.fidelityMarkdown(rows, "Fidelity against dense attention on " + model.getFileName() + ", " + where));
  }
}
