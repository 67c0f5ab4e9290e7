package io.longsieve.engine;

import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.RequestLimits;
import io.longsieve.policy.PolicySpec;

/**
 * One driven run ({@link Engine#drive}) on a runner: open a sequence, run the prompt, hand each
 * step's logits to the driver and feed the token it returns. It calls only the backend's plain
 * {@link ModelRunner.Sequence#prefill} and {@link ModelRunner.Sequence#decode}, the two calls that
 * write logits to the host (the CUDA backend copies them only here; generation picks tokens on the
 * device), so the normal generation path is untouched. The caller holds the runner alone.
 */
final class DrivenDecoding {
  private DrivenDecoding() {}

  /**
   * @throws PromptTooLongException   when the prompt leaves no room for a new token
   * @throws IllegalArgumentException for an empty prompt, a policy the backend does not run, or a driver token
   *     outside the vocabulary
   * @throws UnsupportedOperationException when recall positions are asked of a backend that cannot measure them
   */
  static DrivenRun run(LoadedModel model, ModelRunner runner, int maxContext, PolicySpec defaultPolicy,
                       GenerationRequest r, StepDriver driver, int[] recallPositions, RequestLimits limits) {
    int[] prompt = PromptTokens.checked(model, r, maxContext);
    PolicySpec policy = r.policy() != null ? r.policy() : defaultPolicy;
    int steps = Math.max(1, r.maxNewTokens());
    int capacity = (int) Math.min((long) prompt.length + steps, maxContext);
    int vocab = model.config().vocabSize();
    float[] logits = new float[vocab];
    try (ModelRunner.Sequence seq = runner.open(capacity, policy)) {
      if (recallPositions != null && recallPositions.length > 0) seq.recordAttention(recallPositions);
      return limits.with(() -> {
        limits.check();
        seq.prefill(prompt, logits);
        int step = 0;
        int pos = prompt.length;
        while (true) {
          int next = driver.next(step++, logits);
          if (next < 0 || step >= steps || pos >= capacity) break;
          if (next >= vocab) throw new IllegalArgumentException("driven token " + next + " is outside the vocabulary [0, " + vocab + ")");
          limits.check();
          seq.decode(next, pos++, logits);
        }
        return new DrivenRun(prompt.length, step, seq.policyResolved(), seq.attentionRecall());
      });
    }
  }
}
