package io.longsieve.job;

import io.longsieve.job.PromptBuilder.Prompt;
import io.longsieve.model.Tokenizer;
import java.util.function.ToIntFunction;

/**
 * Shortens a prompt's document part to a token budget, keeping its head and its tail (the start of
 * a document usually says what it is about, the end how it concludes) with a visible marker where
 * the middle was. Only used when the run asks for it (--truncate); otherwise an over-long prompt is
 * a too_long row.
 */
final class PromptTruncator {
  private PromptTruncator() {}

  /** A prompt that fits, and what was cut, for the row's notes column. */
  record Truncated(Prompt prompt, int promptTokens, int headTokens, int tailTokens, int bodyTokens) {
    String note() {
      return "truncated by --truncate: kept the first " + headTokens + " and the last " + tailTokens + " of "
          + bodyTokens + " document tokens (" + (bodyTokens - headTokens - tailTokens) + " omitted)";
    }
  }

  private static final int MAX_ATTEMPTS = 5;

  /**
   * Cuts {@code p}'s body so the whole prompt has at most {@code budget} tokens as counted by
   * {@code count} (which applies the chat template). Returns null when even an empty body does not
   * fit (the instruction and question alone are too long).
   */
  static Truncated fit(Prompt p, int budget, Tokenizer tokenizer, ToIntFunction<Prompt> count) {
    int[] body = tokenizer.encode(p.body(), false);
    int overhead = count.applyAsInt(p.withBody(marker(body.length)));
    int keep = Math.min(budget - overhead, body.length - 1);
    // token boundaries can shift when the cut text is tokenized again, so check and tighten
    for (int attempt = 0; attempt < MAX_ATTEMPTS && keep > 0; attempt++) {
      int head = (keep + 1) / 2;
      int tail = keep - head;
      String cut = tokenizer.decode(body, 0, head, false) + marker(body.length - keep)
          + tokenizer.decode(body, body.length - tail, body.length, false);
      Prompt q = p.withBody(cut);
      int n = count.applyAsInt(q);
      if (n <= budget) return new Truncated(q, n, head, tail, body.length);
      keep -= (n - budget) + 2;
    }
    return null;
  }

  private static String marker(int omitted) {
    return "\n[... " + omitted + " tokens omitted ...]\n";
  }
}
