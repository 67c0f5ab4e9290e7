package io.longsieve.engine;

import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.RequestLimits;
import io.longsieve.policy.PolicySpec;
import io.longsieve.structured.StructuredOutput;

/**
 * Starts requests as {@link GenerationTask}s (template, tokenize, check the context) and runs one
 * alone on the caller's thread: prefill, then sample and decode until an end-of-sequence id, a stop
 * string, maxNewTokens or the context limit. {@link BatchingEngine} steps the same tasks together.
 */
public final class Generator {

  private final LoadedModel model;
  private final ModelRunner runner;
  private final int maxContext;
  private final PolicySpec defaultPolicy;
  private final StructuredOutput structured; // JSON-schema requests' mask caches, shared by this engine's requests

  public Generator(LoadedModel model, ModelRunner runner, int maxContext, PolicySpec defaultPolicy) {
    this.model = model;
    this.runner = runner;
    this.maxContext = maxContext;
    this.defaultPolicy = defaultPolicy;
    this.structured = new StructuredOutput(model.dir(), model.config().vocabSize(), model.eosIds());
  }

  public int maxContext() {
    return maxContext;
  }

  /**
   * A task for {@code r} under {@code limits}, not yet opened; tokenizes on the calling thread.
   *
   * @throws PromptTooLongException when the prompt leaves no room for a new token
   * @throws IllegalArgumentException for an unknown policy, an empty prompt, or a JSON schema on a model
   *     whose tokenizer structured output cannot read
   */
  public GenerationTask start(GenerationRequest r, RequestLimits limits) {
    return start(r, limits, SharedPrefix.NONE);
  }

  /** {@link #start(GenerationRequest, RequestLimits)} for a request that shares a prompt prefix with others. */
  public GenerationTask start(GenerationRequest r, RequestLimits limits, SharedPrefix shared) {
    return new GenerationTask(model, runner, maxContext, defaultPolicy, r, limits,
        r.jsonSchema() == null ? null : structured.start(r.jsonSchema()), shared);
  }

  /** The engine's structured output (benchmarks read its mask caches). */
  public StructuredOutput structured() {
    return structured;
  }

  /** One driven run ({@link Engine#drive}) on this thread; the caller holds the runner alone. */
  public DrivenRun drive(GenerationRequest r, StepDriver driver, int[] recallPositions, RequestLimits limits) {
    return DrivenDecoding.run(model, runner, maxContext, defaultPolicy, r, driver, recallPositions, limits);
  }

  /**
   * Generates for one request on this thread, under this thread's {@link RequestLimits}.
   *
   * @throws PromptTooLongException when the prompt leaves no room for a new token
   * @throws IllegalArgumentException for an unknown policy
   */
  public GenerationResult generate(GenerationRequest r) {
    try (GenerationTask t = start(r, RequestLimits.current())) {
      t.open();
      while (t.prefilling()) t.prefillStep();
      while (!t.done()) t.decodeAlone();
      return t.result();
    }
  }
}
