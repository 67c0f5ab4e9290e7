package io.longsieve.job;

/**
 * A run stopped by something outside the job's control, said in one line with what to do next.
 * Each kind has its own exit code (docs/failures.md), distinct from 2, which means the run was
 * refused before it started. Whatever a stopped run committed stays, and {@code --resume} on the
 * same output finishes it: each document runs once across the runs.
 *
 * <p>Thrown on the driver, and by tasks (it is serializable: Spark hands a task's exception to the
 * driver as the cause of the job's failure).
 */
public final class RunFault extends RuntimeException {

  /** What went wrong, its exit code and the way on. */
  public enum Kind {
    INPUT_CHANGED(3, "make the input stable, then run the same command with --resume"),
    INCOMPLETE(7, "run the same command with --resume to run the missing documents");

    private final int exitCode;
    private final String wayOn;

    Kind(int exitCode, String wayOn) {
      this.exitCode = exitCode;
      this.wayOn = wayOn;
    }

    public int exitCode() {
      return exitCode;
    }

    public String wayOn() {
      return wayOn;
    }
  }

  private final Kind kind;

  public RunFault(Kind kind, String message, Throwable cause) {
    super(message, cause);
    this.kind = kind;
  }

  public Kind kind() {
    return kind;
  }

  static RunFault inputChanged(String what) {
    return new RunFault(Kind.INPUT_CHANGED, what, null);
  }

  /** The one line for stderr: what happened, what was kept, what to do. */
  public String line() {
    return getMessage() + "; what was committed is kept: " + kind.wayOn();
  }

  /** The first RunFault in {@code e}'s causes (a task's, wrapped by Spark), or null. */
  static RunFault find(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof RunFault f) return f;
    }
    return null;
  }
}
