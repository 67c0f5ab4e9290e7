package io.longsieve.job;

import io.longsieve.job.JobMetrics.Counts;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorMetricsUpdate;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import scala.Tuple4;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Driver-side progress: every interval one log line with documents done / total, errors, tokens per
 * second in and out, and an ETA; at the end a summary line. Lines go through log4j2 (logger
 * {@code io.longsieve.job.ProgressListener}), so conf/log4j2.properties decides where they land.
 *
 * <p>Counts are the {@link JobMetrics} accumulators of finished tasks plus, for running tasks, the
 * values their executors last sent with a heartbeat (spark.executor.heartbeatInterval, 10 s by
 * default), so a long partition shows progress before it ends. The ETA scales elapsed time by the
 * share of the estimated cost (CostModel units) done, not the share of documents, since a few long
 * documents can be most of the work.
 *
 * <p>Register with {@code sc.addSparkListener(listener)}, call {@link #start}, and {@link #close} when
 * the job ends (logs the summary and removes nothing else; removing the listener is the caller's).
 */
public final class ProgressListener extends SparkListener implements AutoCloseable {

  private static final Logger LOG = LogManager.getLogger(ProgressListener.class);

  /** The first progress line comes this soon (or after the interval, if shorter). */
  static final long FIRST_LINE_MS = 5000;

  private final JobMetrics metrics;
  private final long[] ids;
  private final long totalDocs;
  private final double totalCost;
  private final LongSupplier nanoTime;
  private final long startNanos;
  private final Map<Long, long[]> running = new ConcurrentHashMap<>(); // taskId → last heartbeat values
  private ScheduledExecutorService timer;
  private org.apache.spark.SparkContext attachedTo; // removed from on close when set by attach

  /**
   * @param totalDocs documents this run will process (after resume skipping); 0 if unknown
   * @param totalCost their estimated cost in CostModel units; 0 to base the ETA on documents
   */
  public ProgressListener(JobMetrics metrics, long totalDocs, double totalCost) {
    this(metrics, totalDocs, totalCost, System::nanoTime);
  }

  ProgressListener(JobMetrics metrics, long totalDocs, double totalCost, LongSupplier nanoTime) {
    this.metrics = metrics;
    this.ids = metrics.ids();
    this.totalDocs = totalDocs;
    this.totalCost = totalCost;
    this.nanoTime = nanoTime;
    this.startNanos = nanoTime.getAsLong();
  }

  /** Creates, registers and starts a listener; {@link #close} unregisters it and logs the summary. */
  public static ProgressListener attach(org.apache.spark.SparkContext sc, JobMetrics metrics, long totalDocs,
      double totalCost, int intervalSeconds) {
    ProgressListener l = new ProgressListener(metrics, totalDocs, totalCost);
    sc.addSparkListener(l);
    l.attachedTo = sc;
    return l.start(Duration.ofSeconds(Math.max(0, intervalSeconds)));
  }

  /** Starts logging a progress line every {@code interval}. */
  public synchronized ProgressListener start(Duration interval) {
    if (timer == null && !interval.isZero() && !interval.isNegative()) {
      timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "longsieve-progress");
        t.setDaemon(true);
        return t;
      });
      long ms = interval.toMillis();
      // the first line early, so a run that is slow to start is seen to be alive; then every interval
      timer.scheduleAtFixedRate(() -> LOG.info(progressLine()), Math.min(FIRST_LINE_MS, ms), ms, TimeUnit.MILLISECONDS);
    }
    return this;
  }

  @Override
  public void onExecutorMetricsUpdate(SparkListenerExecutorMetricsUpdate update) {
    for (Tuple4<Object, Object, Object, scala.collection.immutable.Seq<AccumulableInfo>> t
        : CollectionConverters.asJava(update.accumUpdates())) {
      long taskId = (Long) t._1();
      long[] values = null;
      for (AccumulableInfo info : CollectionConverters.asJava(t._4())) {
        for (int i = 0; i < ids.length; i++) {
          if (info.id() == ids[i] && info.update().isDefined()) {
            if (values == null) values = running.getOrDefault(taskId, new long[ids.length]).clone();
            values[i] = ((Number) info.update().get()).longValue();
          }
        }
      }
      if (values != null) running.put(taskId, values);
    }
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd end) {
    // a finished task's values are in the driver's accumulators now (successful tasks only)
    running.remove(end.taskInfo().taskId());
  }

  /** Finished tasks plus the running tasks' last heartbeats. */
  Counts current() {
    Counts c = metrics.driverValues();
    for (long[] v : running.values()) c = c.plus(Counts.of(v));
    return c;
  }

  /** The periodic line, e.g. "progress: 1,200/10,000 docs, 12.0% of the estimated work, 3 failed, 150 tok/s out, ... ETA 0:41:05". */
  public String progressLine() {
    return progressLine(current(), nanoTime.getAsLong() - startNanos, totalDocs, totalCost);
  }

  static String progressLine(Counts c, long elapsedNanos, long totalDocs, double totalCost) {
    double s = Math.max(1e-9, elapsedNanos / 1e9);
    double share = totalCost > 0 && c.cost() > 0 ? Math.min(1, c.cost() / totalCost)
        : totalDocs > 0 ? Math.min(1, (double) c.docs() / totalDocs) : 0;
    String eta = share <= 0 ? "unknown" : hms(Math.round(s * (1 - share) / share));
    return String.format(Locale.ROOT,
        "progress: %,d/%s docs, %.1f%% of the estimated work, %,d failed, %,.0f tok/s in, %,.1f tok/s out "
            + "(tokens / elapsed wall time), elapsed %s, ETA %s",
        c.docs(), totalDocs > 0 ? String.format(Locale.ROOT, "%,d", totalDocs) : "?", 100 * share, c.failed(),
        c.tokensIn() / s, c.tokensOut() / s, hms(Math.round(s)), eta);
  }

  /** The closing line: what finished tasks counted, over the whole run. */
  public String summaryLine() {
    Counts c = metrics.driverValues();
    double s = Math.max(1e-9, (nanoTime.getAsLong() - startNanos) / 1e9);
    return String.format(Locale.ROOT,
        "summary: %,d docs (%,d ok, %,d failed) in %s of generation; %,d tokens in (%,.0f/s), %,d tokens out (%,.1f/s)",
        c.docs(), c.docs() - c.failed(), c.failed(), hms(Math.round(s)), c.tokensIn(), c.tokensIn() / s,
        c.tokensOut(), c.tokensOut() / s);
  }

  static String hms(long seconds) {
    return String.format(Locale.ROOT, "%d:%02d:%02d", seconds / 3600, (seconds / 60) % 60, seconds % 60);
  }

  /** Stops the periodic line and logs the summary. */
  @Override
  public synchronized void close() {
    if (timer != null) {
      timer.shutdownNow();
      timer = null;
    }
    if (attachedTo != null) {
      attachedTo.removeSparkListener(this);
      attachedTo = null;
    }
    LOG.info(summaryLine());
  }
}
