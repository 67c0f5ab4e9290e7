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

  /**
   * Evaluation only: runs {@code request}'s prompt under its policy (the engine's default when it has
   * none) with the tokens {@code driver} picks from each step's logits, at most
   * {@code request.maxNewTokens()} steps (at least one), until it returns -1 or the context is full.
   * Sampling, stop strings and end-of-sequence ids of the request play no part. Teacher forcing and
   * greedy decoding with the logits kept are drivers ({@link FidelityMeter}). The run has the device to
   * itself: requests already running finish first, new ones wait. Logits travel to the host every step,
   * on this path only.
   *
   * @param recallPositions query positions (ascending) where attention recall is measured
   *     ({@link io.longsieve.engine.spi.AttentionRecall}); null or empty for none
   * @throws PromptTooLongException        when the prompt does not fit the context
   * @throws IllegalArgumentException      for an empty prompt or a policy this backend does not run
   * @throws UnsupportedOperationException when this engine cannot drive runs, or cannot measure recall
   */
  default DrivenRun drive(GenerationRequest request, StepDriver driver, int[] recallPositions) {
    throw new UnsupportedOperationException("this engine does not run driven (teacher-forced) decoding");
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
