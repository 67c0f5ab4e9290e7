package io.longsieve.engine;

import io.longsieve.engine.spi.AttentionRecall;

/**
 * What a driven run ({@link Engine#drive}) did, beside what its {@link StepDriver} saw.
 *
 * @param promptTokens   prompt length in tokens
 * @param steps          logits handed to the driver (tokens fed: steps - 1, or steps when the context filled)
 * @param policyResolved the policy as the backend resolved it (see {@link GenerationStats#policyResolved})
 * @param recall         attention recall at the probed positions; null when none were asked for
 */
public record DrivenRun(int promptTokens, int steps, String policyResolved, AttentionRecall recall) {}
