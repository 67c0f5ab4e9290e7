package io.longsieve.engine;

import io.longsieve.engine.spi.LoadedModel;
import java.util.ArrayList;
import java.util.List;

/**
 * A loaded model on one device, ready to generate. Open it once per process (per executor JVM in
 * Spark) and share it: {@link #generate} is thread-safe, and concurrent calls are batched on the
 * device (continuous batching) with each result what the request gives alone. Closing releases
 * every native and device resource and fails the requests still running.
 *
 * <p>{@code io.longsieve.bootstrap.Backends.open(spec)} opens one on the backend the spec asks for;
 * this package knows no backend, only the {@link io.longsieve.engine.spi.ModelRunner} contract.
 */
public interface Engine extends AutoCloseable {

  LoadedModel model();

  /** "cpu" or "cuda". */
  String backend();

  String device();

  /** Longest prompt + output in tokens. */
  int maxContext();

  /**
   * The prompt token ids {@link #generate} would run for {@code r}: its own ids, else its text
   * chat-templated unless raw.
   */
  default int[] promptTokens(GenerationRequest r) {
    return PromptTokens.of(model(), r);
  }

  /**
   * The request with its prompt ids ({@link #promptTokens}) in it, checked against the context, so a caller
   * that needs the count first (a too_long row, a truncation) tokenizes once: {@link #generate} runs the ids
   * as they are, and its own context check is this one.
   *
   * @throws PromptTooLongException   when the prompt does not fit the context (its tokens and the limit)
   * @throws IllegalArgumentException for an empty prompt or a given id outside the vocabulary
   */
  default GenerationRequest prepare(GenerationRequest r) {
    return r.withPromptIds(PromptTokens.checked(model(), r, maxContext()));
  }

  /**
   * Generates for one request.
   *
   * @throws PromptTooLongException   when the prompt does not fit the context
   * @throws IllegalArgumentException for an unknown policy or an empty prompt
   */
  GenerationResult generate(GenerationRequest request);

  /**
   * Generates for a request whose first {@code shared.tokens()} prompt tokens are shared with other
   * requests (several questions over one document): an engine with prefix reuse computes their KV cache
   * once and starts the others from it (docs/prefix-reuse.md); the result is what {@link #generate}
   * gives, with {@link GenerationStats#prefixTokensReused} saying how much was reused. Default: no reuse.
   */
  default GenerationResult generate(GenerationRequest request, SharedPrefix shared) {
    return generate(request);
  }

  /**
   * Drops the prefixes kept for requests of {@code scope} (a partition that ended); requests still
   * running keep what they took. Asynchronous; a no-op without prefix reuse.
   */
  default void releasePrefixes(String scope) {}

  /** What prefix reuse has done so far; {@link PrefixCounters#NONE} without it. */
  default PrefixCounters prefixCounters() {
    return PrefixCounters.NONE;
  }

  /** Generates for each request in order; a failing request fails the call (callers that need per-request errors call {@link #generate(GenerationRequest)}). */
  default List<GenerationResult> generate(List<GenerationRequest> requests) {
    List<GenerationResult> out = new ArrayList<>(requests.size());
    for (GenerationRequest r : requests) out.add(generate(r));
    return out;
  }

  /** What the engine's scheduler has done so far (batching, memory); all zero for an engine without one. */
  default EngineCounters counters() {
    return new EngineCounters(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, Long.MAX_VALUE);
  }

  @Override
  void close();
}
