package io.longsieve.job;

import io.longsieve.engine.spi.GenerationTimeoutException;
import io.longsieve.engine.spi.RequestLimits;
import io.longsieve.engine.OutOfMemory;
import java.io.Serializable;
import java.util.Locale;
import java.util.function.Supplier;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;

/**
 * Runs one document's generation under the job's per-document failure rules.
 *
 * <p>Failure semantics (executor side):
 * <ul>
 *   <li>Out of memory (GPU or JVM heap, see {@link #classify}): the document is tried again with
 *       prefill chunks a quarter, then a sixteenth of the engine's (at least 16 tokens), since
 *       activation memory grows with the chunk; if it still runs out, {@link Failed} with status
 *       {@code oom}. The engine stays open and serves the next document.
 *   <li>Past the per-document time limit ({@code spark.longsieve.docTimeoutSeconds}; checked by the
 *       engine once per forward chunk, so a chunk in flight finishes first): {@link Failed} with
 *       status {@code timeout}, no retry (the same document would time out again).
 *   <li>A sticky CUDA error (the context is unusable until the process ends: illegal address,
 *       launch failure, ECC error, ...): the executor JVM exits with {@link #STICKY_CUDA_EXIT_CODE}
 *       (45) so that Spark replaces the executor and retries the task on a fresh CUDA context; the
 *       partition's committed output is only ever the one successful attempt's. On the driver (local
 *       mode) exiting would end the application, so {@link FatalDeviceError} fails the task instead.
 *   <li>Anything else propagates to the caller (which writes an {@code engine_error} row).
 * </ul>
 *
 * <p>Test hooks: {@code spark.longsieve.test.injectOomDocId=ID} makes every attempt of document ID
 * fail as if the GPU were out of memory, to exercise the retry and the {@code oom} row end to end;
 * {@code spark.longsieve.test.injectStickyCudaError=ID@FILE} makes the first attempt of ID (the one
 * that creates FILE) fail with a sticky CUDA error, to exercise the executor exit and task retry.
 */
public final class DocumentAttempts implements Serializable {

  /** Exit code of an executor that stopped on a sticky CUDA error (RAPIDS uses 20; we use our own). */
  public static final int STICKY_CUDA_EXIT_CODE = 45;
  public static final String OOM = "oom";
  public static final String TIMEOUT = "timeout";

  private static final Logger LOG = LogManager.getLogger(DocumentAttempts.class);

  private final long timeoutNanos;     // per document; 0: none
  private final int prefillChunk;      // the engine's chunk, the retries divide it
  private final String injectOomDocId; // test hook; null: off
  private final String stickyDocId;    // test hook; null: off
  private final String stickyMarker;   // file whose creation marks the one injected sticky error

  public DocumentAttempts(long timeoutSeconds, int prefillChunk, String injectOomDocId) {
    this(timeoutSeconds, prefillChunk, injectOomDocId, null);
  }

  public DocumentAttempts(long timeoutSeconds, int prefillChunk, String injectOomDocId, String injectSticky) {
    this.timeoutNanos = Math.max(0, timeoutSeconds) * 1_000_000_000L;
    this.prefillChunk = prefillChunk;
    this.injectOomDocId = injectOomDocId == null || injectOomDocId.isBlank() ? null : injectOomDocId;
    int at = injectSticky == null ? -1 : injectSticky.indexOf('@');
    this.stickyDocId = at > 0 ? injectSticky.substring(0, at) : null;
    this.stickyMarker = at > 0 ? injectSticky.substring(at + 1) : null;
  }

  /** The sticky-error test hook: true once, for the attempt that manages to create the marker file. */
  private boolean injectStickyNow(String docId) {
    if (stickyDocId == null || !stickyDocId.equals(docId)) return false;
    try {
      java.nio.file.Files.createFile(java.nio.file.Path.of(stickyMarker));
      return true;
    } catch (java.io.IOException alreadyInjected) {
      return false;
    }
  }

  /** What went wrong, as far as the retry rules care. */
  enum Kind { OUT_OF_MEMORY, TIMEOUT, STICKY_DEVICE, OTHER }

  /** A document that failed for good, with the status of its row. */
  public static final class Failed extends RuntimeException {
    private final String status;

    Failed(String status, String message, Throwable cause) {
      super(message, cause, false, false);
      this.status = status;
    }

    public String status() {
      return status;
    }
  }

  /** Thrown instead of exiting when a sticky device error happens in the driver JVM (local mode). */
  public static final class FatalDeviceError extends Error {
    FatalDeviceError(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /** Raised by the test hook; its name marks it as out-of-memory for {@link #classify}. */
  static final class InjectedOutOfMemoryException extends RuntimeException {
    InjectedOutOfMemoryException(String docId, int chunk) {
      super("injected out of memory for doc_id " + docId + " at prefill chunk " + chunk
          + " (spark.longsieve.test.injectOomDocId)");
    }
  }

  /**
   * Runs {@code generate} for {@code docId}, retrying with smaller prefill chunks on out-of-memory.
   *
   * @throws Failed           oom or timeout, for the caller to turn into a row
   * @throws RuntimeException anything else the generation threw
   */
  public <T> T run(String docId, Supplier<T> generate) {
    int[] chunks = {0, Math.max(16, prefillChunk / 4), Math.max(16, prefillChunk / 16)};
    StringBuilder tried = new StringBuilder();
    Throwable last = null;
    for (int attempt = 0; attempt < chunks.length; attempt++) {
      int chunk = chunks[attempt];
      int effective = chunk == 0 ? prefillChunk : chunk;
      if (attempt > 0 && effective >= prefillChunk) break; // the engine's chunk is already tiny
      try {
        return RequestLimits.of(timeoutNanos, chunk).with(() -> {
          if (docId != null && docId.equals(injectOomDocId)) throw new InjectedOutOfMemoryException(docId, effective);
          if (injectStickyNow(docId)) {
            throw new IllegalStateException("injected CUDA_ERROR_ILLEGAL_ADDRESS for doc_id " + docId
                + " (spark.longsieve.test.injectStickyCudaError)");
          }
          return generate.get();
        });
      } catch (RuntimeException | OutOfMemoryError e) {
        Kind kind = classify(e);
        switch (kind) {
          case TIMEOUT -> throw new Failed(TIMEOUT, "no result within " + timeoutNanos / 1_000_000_000L
              + " s (spark.longsieve.docTimeoutSeconds)", e);
          case STICKY_DEVICE -> ExecutorExit.stickyDeviceError(docId, e);
          case OUT_OF_MEMORY -> {
            last = e;
            if (tried.length() > 0) tried.append(", ");
            tried.append(effective);
            LOG.warn("doc_id {}: out of memory with prefill chunk {} ({}); {}", docId, effective, e.getMessage(),
                attempt + 1 < chunks.length ? "retrying with smaller chunks" : "giving up");
          }
          default -> {
            if (e instanceof RuntimeException re) throw re;
            throw (Error) e;
          }
        }
      }
    }
    throw new Failed(OOM, "out of memory with prefill chunks " + tried + ": " + (last == null ? "" : last.getMessage()), last);
  }

  /**
   * What kind of failure {@code t} is, looking through its causes. Out of memory: the engine's own
   * rule, {@link OutOfMemory#causedBy} (a Java or CUDA out-of-memory error, or the CUDA backend's
   * memory budget exceeded). Sticky device errors: CUDA driver errors after which the context cannot be used
   * again (their CUDA_ERROR_* names in the message), or an exception class named *CudaFatal* /
   * *StickyCuda*. Timeout: {@link GenerationTimeoutException}.
   */
  static Kind classify(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (c instanceof GenerationTimeoutException) return Kind.TIMEOUT;
      String name = c.getClass().getSimpleName();
      String msg = c.getMessage() == null ? "" : c.getMessage();
      String upper = msg.toUpperCase(Locale.ROOT);
      if (name.contains("CudaFatal") || name.contains("StickyCuda")) return Kind.STICKY_DEVICE;
      for (String s : STICKY) if (upper.contains(s)) return Kind.STICKY_DEVICE;
    }
    return OutOfMemory.causedBy(t) ? Kind.OUT_OF_MEMORY : Kind.OTHER;
  }

  /** CUDA driver errors that leave the context unusable (CUDA driver API documentation). */
  static final String[] STICKY = {
      "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
      "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
      "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ECC_UNCORRECTABLE", "CUDA_ERROR_ASSERT",
      "CUDA_ERROR_LAUNCH_TIMEOUT", "CUDA_ERROR_CONTEXT_IS_DESTROYED"};
}
