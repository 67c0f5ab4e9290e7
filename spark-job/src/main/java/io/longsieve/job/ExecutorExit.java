package io.longsieve.job;

import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.spark.SparkEnv;

/**
 * Ends an executor whose GPU context is poisoned.
 *
 * <p>Failure semantics: after a sticky CUDA error every later call on that context fails, so the
 * executor cannot serve any more documents; finishing the task with error rows would turn every
 * remaining document of the partition into a false engine_error. Instead the JVM exits with code
 * {@link DocumentAttempts#STICKY_CUDA_EXIT_CODE} (45): the cluster manager reports the executor lost
 * with that code, Spark launches a replacement and retries the task (it counts towards
 * spark.task.maxFailures; spark.excludeOnFailure.enabled keeps a GPU that keeps failing out of the
 * way). Shutdown hooks run (they close engines), but a hook stuck on the broken context cannot
 * keep the JVM alive: after 30 s the process halts with the same code. In the driver JVM (local mode)
 * nothing exits; a {@link DocumentAttempts.FatalDeviceError} fails the task and thus the job.
 */
final class ExecutorExit {
  private ExecutorExit() {}

  private static final Logger LOG = LogManager.getLogger(ExecutorExit.class);
  static final long HALT_AFTER_MS = 30_000;

  static void stickyDeviceError(String docId, Throwable cause) {
    String what = "sticky CUDA error on doc_id " + docId + ": " + cause;
    SparkEnv env = SparkEnv.get();
    boolean executor = env != null && !"driver".equals(env.executorId());
    if (!executor) throw new DocumentAttempts.FatalDeviceError(what + " (driver JVM: failing the task instead of exiting)", cause);
    LOG.error("{}; exiting the executor with code {} so Spark replaces it and retries the task", what,
        DocumentAttempts.STICKY_CUDA_EXIT_CODE, cause);
    Thread halt = new Thread(() -> {
      try {
        Thread.sleep(HALT_AFTER_MS);
      } catch (InterruptedException ignored) {
        // exit anyway
      }
      Runtime.getRuntime().halt(DocumentAttempts.STICKY_CUDA_EXIT_CODE);
    }, "longsieve-halt");
    halt.setDaemon(true);
    halt.start();
    System.exit(DocumentAttempts.STICKY_CUDA_EXIT_CODE);
  }
}
