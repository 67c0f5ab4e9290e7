package io.longsieve.eval;

import io.longsieve.engine.Engine;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.GenerationStats;
import io.longsieve.engine.PromptTooLongException;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Runs suite documents through an engine under several policies and aggregates the scores.
 * Failure semantics: a document that fails (too long for the model's context, a policy error)
 * scores 0 and is counted in n_errors with its message; the run goes on. Policies are validated
 * once, with {@link PolicySpec#parse}, before any document runs.
 */
public final class EvalRunner {

  private final Engine engine;
  private final TaskPrompts prompts;
  private final int maxNewTokens;  // 0: per task

  public EvalRunner(Engine engine, TaskPrompts prompts, int maxNewTokens) {
    this.engine = engine;
    this.prompts = prompts;
    this.maxNewTokens = maxNewTokens;
  }

  /**
   * The policies as given (the results' labels), each parsed once.
   *
   * @throws IllegalArgumentException naming the first policy that does not parse
   */
  public static Map<String, PolicySpec> parse(List<String> policies) {
    Map<String, PolicySpec> specs = new LinkedHashMap<>();
    for (String p : policies) specs.put(p, PolicySpec.parse(p));
    return specs;
  }

  public List<DocResult> run(List<SuiteItem> items, List<String> policies, Consumer<DocResult> progress) {
    Map<String, PolicySpec> specs = parse(policies);
    List<DocResult> out = new ArrayList<>();
    for (SuiteItem it : items) {
      for (Map.Entry<String, PolicySpec> p : specs.entrySet()) {
        DocResult r = runOne(it, p.getKey(), p.getValue());
        out.add(r);
        if (progress != null) progress.accept(r);
      }
    }
    return out;
  }

  /** One document under {@code spec}; {@code policy} is its text as given, the result's label. */
  public DocResult runOne(SuiteItem it, String policy, PolicySpec spec) {
    GenerationRequest req = GenerationRequest.chat(it.docId(), prompts.userMessage(it),
        maxNewTokens > 0 ? maxNewTokens : EvalSuite.maxNewTokens(it.kind()))
        .withPolicy(spec);
    long t0 = System.nanoTime();
    try {
      GenerationResult g = engine.generate(req);
      double ms = (System.nanoTime() - t0) / 1e6;
      PolicyStats ps = g.stats().policyStats();
      return new DocResult(policy, it, g.text(), Scoring.score(it, g.text()), attended(ps.selectedFractionByLayer()),
          ms, g.stats().inputTokens(), null, ps);
    } catch (PromptTooLongException | IllegalArgumentException e) {
      return new DocResult(policy, it, "", 0.0, Double.NaN, (System.nanoTime() - t0) / 1e6, 0, e.getMessage(), null);
    }
  }

  /** The mean selected fraction over layers (1 when none were reported): a document's attended share. */
  public static double attended(float[] byLayer) {
    if (byLayer == null || byLayer.length == 0) return 1.0;
    double s = 0;
    for (float f : byLayer) s += f;
    return s / byLayer.length;
  }

  /** One row per (task, length, policy), in first-seen order. */
  public static List<EvalRow> aggregate(String runId, List<DocResult> results) {
    Map<String, List<DocResult>> cells = new LinkedHashMap<>();
    for (DocResult r : results) {
      cells.computeIfAbsent(r.item().kind() + "\u0000" + r.item().length() + "\u0000" + r.policy(), k -> new ArrayList<>()).add(r);
    }
    List<EvalRow> rows = new ArrayList<>();
    for (List<DocResult> c : cells.values()) {
      double acc = 0, att = 0, ms = 0;
      int nAtt = 0, errors = 0;
      for (DocResult r : c) {
        acc += r.score();
        ms += r.ms();
        if (!Double.isNaN(r.attendedFraction())) {
          att += r.attendedFraction();
          nAtt++;
        }
        if (r.error() != null) errors++;
      }
      DocResult f = c.get(0);
      rows.add(new EvalRow(runId, f.item().kind(), f.item().length(), f.policy(), acc / c.size(),
          nAtt == 0 ? Double.NaN : att / nAtt, ms / c.size(), c.size(), errors));
    }
    return rows;
  }
}
