package io.longsieve.model;

/** A checkpoint folder that cannot be used; the message names the file and the field at fault. */
public final class CheckpointException extends RuntimeException {
  public CheckpointException(String message) {
    super(message);
  }

  public CheckpointException(String message, Throwable cause) {
    super(message, cause);
  }
}
