package io.longsieve.engine;

import io.longsieve.attention.PolicySpec;
import io.longsieve.attention.PolicyStats;
import java.util.Arrays;

/**
 * The generation loop shared by every backend: template and tokenize, prefill, then sample and
 * decode until an end-of-sequence id, a stop string, maxNewTokens or the context limit.
 */
public final class Generator {

  private final LoadedModel model;
  private final ModelRunner runner;
  private final int maxContext;
  private final String defaultPolicy;

  public Generator(LoadedModel model, ModelRunner runner, int maxContext, String defaultPolicy) {
    this.model = model;
    this.runner = runner;
    this.maxContext = maxContext;
    this.defaultPolicy = defaultPolicy;
  }

  public int maxContext() {
    return maxContext;
  }

  /**
   * Generates for one request.
   *
   * @throws PromptTooLongException when the prompt leaves no room for a new token
   * @throws IllegalArgumentException for an unknown policy
   */
  public GenerationResult generate(GenerationRequest r) {
    long t0 = System.nanoTime();
    PolicySpec policy = PolicySpec.parse(r.policy() != null ? r.policy() : defaultPolicy);
    int[] prompt = model.promptTokens(r);
    if (prompt.length == 0) throw new IllegalArgumentException("prompt has no tokens");
    if (prompt.length >= maxContext) throw new PromptTooLongException(prompt.length, maxContext);
    int capacity = (int) Math.min((long) prompt.length + Math.max(r.maxNewTokens(), 1), maxContext);
    int vocab = model.config().vocabSize();
    float[] logits = new float[vocab];
    int[] out = new int[capacity - prompt.length];
    int produced = 0;
    FinishReason finish = FinishReason.LENGTH;
    String text = "";
    Sampler sampler = new Sampler(r.sampling(), vocab);
    double prefillMs, ttftMs = 0, decodeMs = 0;
    try (ModelRunner.Sequence seq = runner.open(capacity, policy.canonical())) {
      seq.prefill(prompt, logits);
      prefillMs = ms(System.nanoTime() - t0);
      long kvBefore = seq.kvBytesBeforeCompression();
      long kvAfter = seq.kvBytesAfterCompression();
      long td = System.nanoTime();
      while (produced < r.maxNewTokens()) {
        if (produced > 0) {
          if (prompt.length + produced >= capacity) {
            finish = FinishReason.CONTEXT_FULL;
            break;
          }
          seq.decode(out[produced - 1], prompt.length + produced - 1, logits);
        }
        int token = sampler.next(logits, vocab);
        out[produced++] = token;
        if (produced == 1) {
          ttftMs = ms(System.nanoTime() - t0);
          td = System.nanoTime();
        }
        if (model.eosIds().contains(token)) {
          finish = FinishReason.EOS;
          break;
        }
        if (!r.stopStrings().isEmpty()) {
          String sofar = model.tokenizer().decode(out, 0, produced, true);
          int cut = firstStop(sofar, r);
          if (cut >= 0) {
            text = sofar.substring(0, cut);
            finish = FinishReason.STOP_STRING;
            break;
          }
        }
      }
      if (produced > 1) decodeMs = ms(System.nanoTime() - td);
      int[] ids = Arrays.copyOf(out, produced);
      if (finish != FinishReason.STOP_STRING) text = model.tokenizer().decode(ids, true);
      if (r.maxNewTokens() == 0) ttftMs = prefillMs;
      PolicyStats ps = seq.policyStats();
      double totalMs = ms(System.nanoTime() - t0);
      double attentionMs = seq.attentionMs();
      GenerationStats stats = new GenerationStats(prompt.length, produced, ttftMs, prefillMs, decodeMs, totalMs,
          runner.backend(), runner.device(), seq.policy(), ps.attendedTokensMean(), ps.selectedFractionByLayer(),
          ps.selectionCacheHitRate(), kvBefore, kvAfter, ps.sparseLayers(), ps.selectionMs(),
          Math.max(0, attentionMs - ps.selectionMs()));
      return new GenerationResult(r.id(), text, ids, finish, stats);
    }
  }

  private static int firstStop(String text, GenerationRequest r) {
    int best = -1;
    for (String s : r.stopStrings()) {
      if (s.isEmpty()) continue;
      int i = text.indexOf(s);
      if (i >= 0 && (best < 0 || i < best)) best = i;
    }
    return best;
  }

  private static double ms(long nanos) {
    return nanos / 1e6;
  }
}
