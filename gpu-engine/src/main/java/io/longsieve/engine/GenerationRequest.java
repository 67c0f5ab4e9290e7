package io.longsieve.engine;

import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.policy.PolicySpec;
import io.longsieve.structured.OutputSchema;
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
 * @param policy       attention policy, parsed where its text came in ({@link PolicySpec#parse});
 *                     null takes the engine's default
 * @param promptIds    null: tokenize {@code prompt}; else these token ids are the prompt as is (no chat
 *                     template, no BOS added; {@code prompt} and {@code raw} are ignored), for benchmarks
 *                     that feed the same ids to another implementation
 * @param minNewTokens end-of-sequence ids do not end the request before this many tokens (the EOS id is
 *                     kept in the output and decoding goes on; stop strings still apply); 0: EOS ends it
 * @param jsonSchema   null: free text; else the output is a JSON document of this schema (constrained
 *                     decoding, docs/structured-output.md): it ends when the document closes, and stop
 *                     strings and minNewTokens do not apply
 */
public record GenerationRequest(
    String id,
    String prompt,
    String system,
    boolean raw,
    int maxNewTokens,
    SamplingParams sampling,
    List<String> stopStrings,
    PolicySpec policy,
    int[] promptIds,
    int minNewTokens,
    OutputSchema jsonSchema) implements Serializable {

  public GenerationRequest {
    if (prompt == null && promptIds == null) throw new IllegalArgumentException("prompt is required");
    if (prompt == null) prompt = "";
    if (promptIds != null) promptIds = promptIds.clone();
    if (maxNewTokens < 0) throw new IllegalArgumentException("maxNewTokens must be >= 0");
    if (minNewTokens < 0) throw new IllegalArgumentException("minNewTokens must be >= 0");
    if (sampling == null) sampling = SamplingParams.GREEDY;
    stopStrings = stopStrings == null ? List.of() : List.copyOf(stopStrings);
  }

  /** A request without a JSON schema. */
  public GenerationRequest(String id, String prompt, String system, boolean raw, int maxNewTokens,
                           SamplingParams sampling, List<String> stopStrings, PolicySpec policy, int[] promptIds,
                           int minNewTokens) {
    this(id, prompt, system, raw, maxNewTokens, sampling, stopStrings, policy, promptIds, minNewTokens, null);
  }

  /** A request on prompt text (tokenized by the engine), EOS ending it. */
  public GenerationRequest(String id, String prompt, String system, boolean raw, int maxNewTokens,
                           SamplingParams sampling, List<String> stopStrings, PolicySpec policy) {
    this(id, prompt, system, raw, maxNewTokens, sampling, stopStrings, policy, null, 0);
  }

  /** The prompt ids as given (a copy), or null when the engine tokenizes {@code prompt}. */
  @Override
  public int[] promptIds() {
    return promptIds == null ? null : promptIds.clone();
  }

  /** A greedy chat request with no system message and the engine's default policy. */
  public static GenerationRequest chat(String id, String prompt, int maxNewTokens) {
    return new GenerationRequest(id, prompt, null, false, maxNewTokens, SamplingParams.GREEDY, List.of(), null);
  }

  /** A greedy raw-prompt request. */
  public static GenerationRequest raw(String id, String prompt, int maxNewTokens) {
    return new GenerationRequest(id, prompt, null, true, maxNewTokens, SamplingParams.GREEDY, List.of(), null);
  }

  public GenerationRequest withPolicy(PolicySpec p) {
    return new GenerationRequest(id, prompt, system, raw, maxNewTokens, sampling, stopStrings, p, promptIds,
        minNewTokens, jsonSchema);
  }

  public GenerationRequest withSampling(SamplingParams s) {
    return new GenerationRequest(id, prompt, system, raw, maxNewTokens, s, stopStrings, policy, promptIds,
        minNewTokens, jsonSchema);
  }

  public GenerationRequest withStopStrings(List<String> s) {
    return new GenerationRequest(id, prompt, system, raw, maxNewTokens, sampling, s, policy, promptIds,
        minNewTokens, jsonSchema);
  }

  public GenerationRequest withSystem(String s) {
    return new GenerationRequest(id, prompt, s, raw, maxNewTokens, sampling, stopStrings, policy, promptIds,
        minNewTokens, jsonSchema);
  }

  public GenerationRequest withMaxNewTokens(int n) {
    return new GenerationRequest(id, prompt, system, raw, n, sampling, stopStrings, policy, promptIds,
        minNewTokens, jsonSchema);
  }

  /** The same request on these token ids as the prompt (see {@link #promptIds}). */
  public GenerationRequest withPromptIds(int[] ids) {
    return new GenerationRequest(id, prompt, system, raw, maxNewTokens, sampling, stopStrings, policy, ids,
        minNewTokens, jsonSchema);
  }

  /** The same request with its output held to a JSON schema (null: free text). */
  public GenerationRequest withJsonSchema(OutputSchema schema) {
    return new GenerationRequest(id, prompt, system, raw, maxNewTokens, sampling, stopStrings, policy, promptIds, minNewTokens,
        schema);
  }

  /** The same request with EOS ignored before n tokens (see {@link #minNewTokens}). */
  public GenerationRequest withMinNewTokens(int n) {
    return new GenerationRequest(id, prompt, system, raw, maxNewTokens, sampling, stopStrings, policy, promptIds,
        n, jsonSchema);
  }
}
