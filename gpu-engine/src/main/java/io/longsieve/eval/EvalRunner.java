package io.longsieve.eval;

import io.longsieve.engine.DenseReference;
import io.longsieve.engine.Engine;
import io.longsieve.engine.Fidelity;
import io.longsieve.engine.FidelityMeter;
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
 * Runs suite documents through an engine under several policies and aggregates the scores, and
 * (with {@link #withFidelity}) each document's fidelity against dense attention.
 * Failure semantics: a document that fails (too long for the model's context, a policy error)
 * scores 0 and is counted in n_errors with its message, without a fidelity measurement; the run goes on. Policies are validated
 * once, with {@link PolicySpec#parse}, before any document runs.
 */
public final class EvalRunner {

  private final Engine engine;
  private final TaskPrompts prompts;
  private final int maxNewTokens;  // 0: per task
  private final int recallPoints;  // -1: no fidelity measurement; else recall positions (0: none) per document

  public EvalRunner(Engine engine, TaskPrompts prompts, int maxNewTokens) {
    this(engine, prompts, maxNewTokens, -1);
  }

  private EvalRunner(Engine engine, TaskPrompts prompts, int maxNewTokens, int recallPoints) {
    this.engine = engine;
    this.prompts = prompts;
    this.maxNewTokens = maxNewTokens;
    this.recallPoints = recallPoints;
  }

  /**
   * This runner also measuring each document's fidelity against dense attention ({@link FidelityMeter}): one
   * dense reference run per document, one teacher-forced run per document and policy, attention recall at
   * {@code recallPoints} prompt and decode positions (0: none).
   */
  public EvalRunner withFidelity(int recallPoints) {
    return new EvalRunner(engine, prompts, maxNewTokens, Math.max(0, recallPoints));
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
      DenseReference ref = recallPoints < 0 ? null : reference(it);
      for (Map.Entry<String, PolicySpec> p : specs.entrySet()) {
        DocResult r = runOne(it, p.getKey(), p.getValue(), ref);
        out.add(r);
        if (progress != null) progress.accept(r);
      }
    }
    return out;
  }

  /** One document under {@code spec}; {@code policy} is its text as given, the result's label. */
  public DocResult runOne(SuiteItem it, String policy, PolicySpec spec) {
    return runOne(it, policy, spec, null);
  }

  private GenerationRequest request(SuiteItem it) {
    return GenerationRequest.chat(it.docId(), prompts.userMessage(it),
        maxNewTokens > 0 ? maxNewTokens : EvalSuite.maxNewTokens(it.kind()));
  }

  /** The dense reference of a document, or null when it cannot be made (its generation then fails too). */
  private DenseReference reference(SuiteItem it) {
    try {
      return FidelityMeter.reference(engine, request(it));
    } catch (PromptTooLongException | IllegalArgumentException e) {
      return null;
    }
  }

  /** One document under {@code spec}, its fidelity measured against {@code ref} when that is not null. */
  private DocResult runOne(SuiteItem it, String policy, PolicySpec spec, DenseReference ref) {
    GenerationRequest req = request(it).withPolicy(spec);
    long t0 = System.nanoTime();
    try {
      GenerationResult g = engine.generate(req);
      double ms = (System.nanoTime() - t0) / 1e6;
      PolicyStats ps = g.stats().policyStats();
      Fidelity f = ref == null ? null : FidelityMeter.measure(engine, req, spec, ref, recallPoints);
      return new DocResult(policy, it, g.text(), Scoring.score(it, g.text()), attended(ps.selectedFractionByLayer()),
          ms, g.stats().inputTokens(), null, ps, f);
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
      double acc = 0, att = 0, ms = 0, klMean = 0, klMax = 0, top1 = 0, recall = 0;
      int nAtt = 0, errors = 0, nFid = 0, nRecall = 0;
      for (DocResult r : c) {
        Fidelity f = r.fidelity();
        if (f != null) {
          klMean += f.klMean();
          klMax += f.klMax();
          top1 += f.top1Agreement();
          nFid++;
          if (!Double.isNaN(f.recallMean())) {
            recall += f.recallMean();
            nRecall++;
          }
        }
        acc += r.score();
        ms += r.ms();
        if (!Double.isNaN(r.attendedFraction())) {
          att += r.attendedFraction();
          nAtt++;
        }
        if (r.error() != null) errors++;
      }
      DocResult f = c.get(0);
      double none = Double.NaN;
      rows.add(new EvalRow(runId, f.item().kind(), f.item().length(), f.policy(), acc / c.size(),
          nAtt == 0 ? none : att / nAtt, ms / c.size(), c.size(), errors, nFid == 0 ? none : klMean / nFid,
          nFid == 0 ? none : klMax / nFid, nFid == 0 ? none : top1 / nFid, nRecall == 0 ? none : recall / nRecall, nFid));
    }
    return rows;
  }
}
