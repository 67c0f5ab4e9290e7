package io.longsieve.job;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import sun.misc.Signal;
import sun.misc.SignalHandler;

/**
 * {@code longsieve run} stopped by SIGTERM or SIGINT (a scheduler's kill, Ctrl-C): one line on stderr
 * saying so, what was committed and that {@code --resume} finishes the run, instead of the traces of
 * every Spark job the shutdown cancels. The exit code stays the shell's convention, 128 + the
 * signal's number (143 for SIGTERM, 130 for SIGINT).
 *
 * <p>How: while a run is watched, SIGTERM and SIGINT handlers record which signal came and exit with
 * that code; a shutdown hook, registered with Hadoop's ShutdownHookManager above Spark's own (Spark
 * stops its context from a hook at priority 40 there, and those cancelled jobs make the noise),
 * prints the line first. The main thread, which then sees its Spark jobs fail, prints nothing more
 * ({@link #stopped}). Whatever the run committed before is kept: commit slices are atomic (Spark's
 * commit protocol), the staging copy and half-written files are cleaned by the next run, and the
 * next run's {@code --resume} skips every document already ok.
 */
final class RunInterruption implements AutoCloseable {

  /** Above Spark's hook (FileSystem's 10 + 30) in Hadoop's ShutdownHookManager: runs before Spark stops. */
  static final int HOOK_PRIORITY = 100;
  private static final String[] SIGNALS = {"TERM", "INT"};

  private final String runId;
  private final PrintWriter err;
  private final Runnable hook = this::onShutdown;
  private final List<Signal> handled = new ArrayList<>();
  private final List<SignalHandler> previous = new ArrayList<>();
  private volatile String signal;    // TERM or INT once one came; null otherwise
  private volatile boolean done;     // the run ended by itself (ok or failed): the hook stays silent
  private volatile String committed = "no commit slice was committed yet";

  private static volatile RunInterruption current; // the watched run of this JVM, for progress updates

  private RunInterruption(String runId, PrintWriter err) {
    this.runId = runId;
    this.err = err;
  }

  /** Starts watching: the signal handlers and the hook, until {@link #close}. */
  static RunInterruption watch(String runId, PrintWriter err) {
    RunInterruption w = new RunInterruption(runId, err);
    for (String name : SIGNALS) {
      try {
        Signal s = new Signal(name);
        w.previous.add(Signal.handle(s, sig -> w.onSignal(sig)));
        w.handled.add(s);
      } catch (IllegalArgumentException e) {
        // the JVM runs with -Xrs or the signal is taken: the hook alone still says it, without the name
      }
    }
    org.apache.hadoop.util.ShutdownHookManager.get().addShutdownHook(w.hook, HOOK_PRIORITY);
    current = w;
    return w;
  }

  /** What the run has committed so far, a clause for the line the hook prints; no-op when no run is watched. */
  static void committed(String what) {
    RunInterruption w = current;
    if (w != null) w.committed = what;
  }

  /** True once a signal (or a JVM shutdown from elsewhere) stopped the run: the caller prints nothing more. */
  boolean stopped() {
    return signal != null || (!done && org.apache.hadoop.util.ShutdownHookManager.get().isShutdownInProgress());
  }

  /** The exit code of a stop by {@link #signal}: 128 + its number. */
  int exitCode() {
    return "INT".equals(signal) ? 130 : 143;
  }

  private void onSignal(Signal sig) {
    signal = sig.getName();
    System.exit(128 + sig.getNumber()); // runs the shutdown hooks, this class's first
  }

  private void onShutdown() {
    if (done) return;
    String what = signal == null ? "the JVM is shutting down" : "SIG" + signal;
    err.println("longsieve run " + runId + " stopped: " + what + " before the run finished; " + committed
        + ": run the same command with --resume to finish it");
    err.flush();
  }

  /** The run ended by itself: handlers restored, hook removed. */
  @Override
  public void close() {
    done = true;
    if (current == this) current = null;
    for (int i = 0; i < handled.size(); i++) {
      try {
        Signal.handle(handled.get(i), previous.get(i));
      } catch (IllegalArgumentException e) {
        // nothing to restore
      }
    }
    try {
      org.apache.hadoop.util.ShutdownHookManager.get().removeShutdownHook(hook);
    } catch (IllegalStateException e) {
      // shutdown in progress: the hook has run or will find done set
    }
  }
}
