package io.longsieve.engine;

/** The prompt does not fit the engine's context; the job turns this into a {@code too_long} row. */
public final class PromptTooLongException extends RuntimeException {
  private final int tokens;
  private final int limit;

  public PromptTooLongException(int tokens, int limit) {
    super("prompt has " + tokens + " tokens; the context limit is " + limit);
    this.tokens = tokens;
    this.limit = limit;
  }

  public int tokens() {
    return tokens;
  }

  public int limit() {
    return limit;
  }
}
