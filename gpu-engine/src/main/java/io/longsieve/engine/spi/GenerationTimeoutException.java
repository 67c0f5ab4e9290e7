package io.longsieve.engine.spi;

/** A request ran past the deadline its caller set ({@link RequestLimits}); the job writes a {@code timeout} row. */
public final class GenerationTimeoutException extends RuntimeException {
  public GenerationTimeoutException(String message) {
    super(message);
  }
}
