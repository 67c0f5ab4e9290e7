package io.longsieve.job;

import java.io.IOException;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A run stopped by something outside the job's control, said in one line with what to do next.
 * Each kind has its own exit code (docs/failures.md), distinct from 2, which means the run was
 * refused before it started, and from 1, an unexpected error. Whatever a stopped run committed stays
 * (each commit slice is atomic), and {@code --resume} on the same output finishes it: each document
 * runs once across the runs.
 *
 * <p>Thrown on the driver, and by tasks (it is serializable: Spark hands a task's exception to the
 * driver as the cause of the job's failure). {@link #explain} turns Spark's own failures into these.
 */
public final class RunFault extends RuntimeException {

  /** What went wrong, its exit code and the way on. */
  public enum Kind {
    INPUT_CHANGED(3, "what was committed is kept: make the input stable, then run the same command with --resume"),
    NO_SPACE(4, "what was committed is kept: free space there, then run the same command with --resume"),
    OUTPUT_GONE(5, "nothing more was written: find what removed it, then run the same command again "
        + "(with --resume if part of the output is left)"),
    SPARK_GAVE_UP(6, "what was committed is kept: the cause is in the log; fix it, then run the same command with --resume"),
    INCOMPLETE(7, "what was committed is kept: run the same command with --resume to run the missing documents");

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

  /** Longest part of a Spark failure reason quoted in the line. */
  static final int REASON_CHARS = 300;

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
    return getMessage() + "; " + kind.wayOn();
  }

  /** The first RunFault in {@code e}'s causes (a task's, wrapped by Spark), or null. */
  static RunFault find(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof RunFault f) return f;
    }
    return null;
  }

  /**
   * A failure of a run, said as what caused it where that can be known, in this order: a task's
   * {@link RunFault}; an input file that is not as planned (Spark's own read error for a deleted file
   * names neither the cause nor the way on); the output's lock file or run record gone (the output
   * folder was removed); no space left on a disk; Spark giving up on a task after its retries (a task
   * that kept failing, executors lost). Otherwise null: an unexpected error.
   */
  static RunFault explain(Throwable e, InputSnapshot input, RunOptions o, Configuration conf) {
    RunFault task = find(e);
    if (task != null) return new RunFault(task.kind(), task.getMessage(), e);
    RunFault changed = input.firstChange(conf);
    if (changed != null) return new RunFault(changed.kind(), changed.getMessage(), e);
    String gone = outputGone(o, conf);
    if (gone != null) return new RunFault(Kind.OUTPUT_GONE, gone, e);
    String space = noSpace(e);
    if (space != null) return new RunFault(Kind.NO_SPACE, "out of disk space (" + space + ")", e);
    String reason = sparkGaveUp(e);
    if (reason != null) return new RunFault(Kind.SPARK_GAVE_UP, reason, e);
    return null;
  }

  /**
   * Why the output folder no longer holds this run, or null while it does: its lock file and the
   * run's start record are created before Spark starts and never removed during the run.
   */
  static String outputGone(RunOptions o, Configuration conf) {
    Path lock = new Path(o.output(), OutputLock.FILE);
    Path started = OutputLock.startedPath(o.output(), o.runId());
    try {
      FileSystem fs = lock.getFileSystem(conf);
      if (!fs.exists(new Path(o.output()))) return "the output folder " + o.output() + " was removed during the run";
      for (Path p : new Path[] {lock, started}) {
        if (!fs.exists(p)) return "the output folder " + o.output() + " was changed by something else during the run ("
            + p.getName() + " is gone)";
      }
      return null;
    } catch (IOException e) {
      return "the output folder " + o.output() + " cannot be read any more (" + e.getMessage() + ")";
    }
  }

  /** The disk-full message among {@code e}'s causes (Hadoop's FSError included), or null. */
  static String noSpace(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      String m = String.valueOf(t.getMessage());
      for (String s : new String[] {"No space left on device", "Disk quota exceeded"}) {
        if (m.contains(s)) return s;
      }
    }
    return null;
  }

  /**
   * The reason Spark gave when it stopped a job after a task's retries (the task's own exception,
   * an executor lost, the context stopped), first line, shortened; null for other failures.
   */
  static String sparkGaveUp(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (!t.getClass().getName().equals("org.apache.spark.SparkException")) continue;
      String m = String.valueOf(t.getMessage()).lines().findFirst().orElse("").strip();
      String aborted = "Job aborted due to stage failure: ";
      if (m.startsWith(aborted)) return "Spark gave up after the task's retries: " + shorten(m.substring(aborted.length()));
      if (m.toLowerCase(Locale.ROOT).contains("cancelled because sparkcontext was shut down")) {
        return "Spark stopped while the run was going on: " + shorten(m);
      }
    }
    return null;
  }

  private static String shorten(String s) {
    return s.length() <= REASON_CHARS ? s : s.substring(0, REASON_CHARS) + " ...";
  }
}
