package io.longsieve.model;

import java.time.Duration;

/**
 * How much work one chat-template render may do. A template is code from the checkpoint folder, so
 * a careless or hostile one (nested loops, a {@code range} of a hundred million) must not hang an
 * executor or fill its heap; a render that goes past a bound is refused with the bound named, never
 * cut short silently. The defaults leave real templates (a loop over the messages, a few tags each)
 * orders of magnitude of room.
 *
 * @param maxRange      values one {@code range(...)} may give; a larger range is refused, not truncated
 * @param maxWork       steps per render: every template node rendered (text, tag, expression) and
 *                      every value a {@code range} yields counts one, so an empty nested loop costs
 *                      as much as a full one
 * @param baseOutput    characters of output the template may add on its own; the output bound is this
 *                      plus {@code outputPerInputChar} × the characters of the conversation
 * @param outputPerInputChar how many times the template may repeat the conversation's text
 * @param maxRenderDepth Jinjava's bound on nested renders (macros, includes)
 * @param timeLimit     wall-clock bound of one render, checked between template steps
 */
record TemplateLimits(int maxRange, long maxWork, long baseOutput, int outputPerInputChar, int maxRenderDepth,
                      Duration timeLimit) {

  static final TemplateLimits DEFAULT = new TemplateLimits(100_000, 1_000_000, 1L << 20, 4, 10, Duration.ofSeconds(5));

  /** The output bound for a conversation of {@code inputChars} characters. */
  long maxOutput(long inputChars) {
    return baseOutput + outputPerInputChar * inputChars;
  }
}
