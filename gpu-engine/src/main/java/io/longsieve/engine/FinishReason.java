package io.longsieve.engine;

/** Why generation ended; {@link #label()} is what the job writes to Parquet. */
public enum FinishReason {
  /** The model produced one of its end-of-sequence tokens. */
  EOS("eos"),
  /** The decoded text reached one of the request's stop strings. */
  STOP_STRING("stop"),
  /** maxNewTokens were generated. */
  LENGTH("length"),
  /** The context (prompt + output) reached the engine's limit. */
  CONTEXT_FULL("context_full"),
  /** The JSON document the request's schema asks for closed (no byte could extend it). */
  JSON_COMPLETE("json_complete");

  private final String label;

  FinishReason(String label) {
    this.label = label;
  }

  public String label() {
    return label;
  }
}
