package io.longsieve.engine;

import java.io.Serializable;
import java.util.List;

/**
 * One document's generation.
 *
 * @param id           caller's id, echoed in the result
 * @param prompt       the user message (chat) or the whole prompt text (raw)
 * @param system       optional system message for the chat template; null for none
 * @param raw          true: tokenize the prompt as is (the tokenizer's own special tokens only);
 *                     false: wrap it in the model's chat template, or the plain fallback
 * @param maxNewTokens upper bound on generated tokens
 * @param sampling     greedy or seeded temperature/top-p
 * @param stopStrings  generation stops when the decoded text contains one of them (not included)
 * @param policy       attention policy, e.g. "dense" or "tsa + selkv:ratio=0.25 + tokenselect:k=2048";
 *                     null takes the engine's default
 */
public record GenerationRequest(
    String id,
    String prompt,
    String system,
    boolean raw,
    int maxNewTokens,
    SamplingParams sampling,
    List<String> stopStrings,
    String policy) implements Serializable {

  public GenerationRequest {
    if (prompt == null) throw new IllegalArgumentException("prompt is required");
    if (maxNewTokens < 0) throw new IllegalArgumentException("maxNewTokens must be >= 0");
    if (sampling == null) sampling = SamplingParams.GREEDY;
    stopStrings = stopStrings == null ? List.of() : List.copyOf(stopStrings);
  }

  /** A greedy chat request with no system message and the engine's default policy. */
  public static GenerationRequest chat(String id, String prompt, int maxNewTokens) {
    return new GenerationRequest(id, prompt, null, false, maxNewTokens, SamplingParams.GREEDY, List.of(), null);
  }

  /** A greedy raw-prompt request. */
  public static GenerationRequest raw(String id, String prompt, int maxNewTokens) {
    return new GenerationRequest(id, prompt, null, true, maxNewTokens, SamplingParams.GREEDY, List.of(), null);
  }

  public GenerationRequest withPolicy(String p) {
    return new GenerationRequest(id, prompt, system, raw, maxNewTokens, sampling, stopStrings, p);
  }

  public GenerationRequest withSampling(SamplingParams s) {
    return new GenerationRequest(id, prompt, system, raw, maxNewTokens, s, stopStrings, policy);
  }

  public GenerationRequest withStopStrings(List<String> s) {
    return new GenerationRequest(id, prompt, system, raw, maxNewTokens, sampling, s, policy);
  }

  public GenerationRequest withSystem(String s) {
    return new GenerationRequest(id, prompt, s, raw, maxNewTokens, sampling, stopStrings, policy);
  }
}
