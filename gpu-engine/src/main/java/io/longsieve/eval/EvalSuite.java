package io.longsieve.eval;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A seeded suite: every task at each multiple of the training length, the asked-about needle at
 * depths spread evenly over the document ((i + 0.5) / perCell for the i-th document of a cell).
 * Prompt targets leave room for the answer within the multiple (e.g. 1x of 2048 is a prompt of
 * at most 2048 - 40 tokens for mdqa), as in training.
 */
public final class EvalSuite {
  private EvalSuite() {}

  /** Tokens kept free for the answer, per task (tools/train/train_needle.py's ANSWER_BUDGET). */
  static final Map<String, Integer> ANSWER_BUDGET = Map.of(
      "summary", 90, "vt", 40, "niah_multiquery", 60, "niah_multivalue", 50, "mdqa", 40);
  /** Tokens the chat template adds around the user message. */
  static final int TEMPLATE_TOKENS = 8;

  public static int answerBudget(String kind) {
    return ANSWER_BUDGET.getOrDefault(kind, 30);
  }

  /** Generation limit per task: the reference plus headroom. */
  public static int maxNewTokens(String kind) {
    return kind.equals("summary") ? 120 : 64;
  }

  public static List<SuiteItem> generate(SuiteGenerator gen, List<String> kinds, int trainLength, List<Integer> multiples,
      int perCell, long seed) {
    List<SuiteItem> out = new ArrayList<>();
    for (int m : multiples) {
      for (String kind : kinds) {
        int k = SuiteGenerator.KINDS.indexOf(kind);
        if (k < 0) throw new IllegalArgumentException("unknown suite task '" + kind + "'; known: " + SuiteGenerator.KINDS);
        for (int i = 0; i < perCell; i++) {
          double depth = (i + 0.5) / perCell;
          int target = trainLength * m - answerBudget(kind) - TEMPLATE_TOKENS;
          out.add(gen.make(kind, seed + 100_000L * k + 1000L * m + i, target, depth, 4).withLength(trainLength * m));
        }
      }
    }
    return out;
  }
}
