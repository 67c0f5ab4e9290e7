package io.longsieve.job;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.spark.SparkContext;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceProfile;
import org.apache.spark.resource.TaskResourceRequest;
import org.apache.spark.status.api.v1.ExecutorSummary;
import org.apache.spark.status.api.v1.StageData;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Driver side: turns a run that would wait forever for resources no executor has into a failure
 * with one line that names the setting and the fix.
 *
 * <p>Spark never fails a stage whose tasks ask for something no executor offers (a GPU share on
 * executors without GPUs, executors larger than any worker so none starts): it waits, logging
 * nothing. Once a second this watchdog looks at the active stages (Spark's status store); a stage
 * that has started no task while no live executor has what its tasks ask for (cores and every
 * custom resource of its resource profile) is waiting for resources. After
 * {@code spark.longsieve.resourceWaitSeconds} of that, the watchdog cancels the run's jobs and
 * {@link #guard} throws {@link IllegalArgumentException} with the message. A stage whose tasks do
 * fit some executor is never failed: busy executors are not missing ones.
 *
 * <p>Failure semantics: the watchdog itself never fails a run for its own errors (a status-store
 * lookup that throws is logged and retried the next second). It is off in local mode (the driver is
 * the executor) and with 0 seconds.
 */
final class ResourceWatchdog implements AutoCloseable {

  private static final Logger LOG = LogManager.getLogger(ResourceWatchdog.class);

  private final SparkContext sc;
  private final int waitSeconds;
  private final ScheduledExecutorService timer;
  private final Map<Integer, Long> waitingSince = new HashMap<>(); // stage id → first check that found it starved
  private volatile String failure;

  private ResourceWatchdog(SparkContext sc, int waitSeconds, boolean on) {
    this.sc = sc;
    this.waitSeconds = waitSeconds;
    if (on) {
      timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "longsieve-resource-watchdog");
        t.setDaemon(true);
        return t;
      });
      timer.scheduleWithFixedDelay(this::checkSafely, 1, 1, TimeUnit.SECONDS);
    } else {
      timer = null;
    }
  }

  /** Starts watching {@code sc}'s stages; off in local mode and when {@code waitSeconds} is 0. */
  static ResourceWatchdog start(SparkContext sc, int waitSeconds) {
    String master = sc.master();
    boolean local = master.equals("local") || master.startsWith("local[");
    return new ResourceWatchdog(sc, waitSeconds, waitSeconds > 0 && !local);
  }

  /**
   * Runs {@code body}; when the watchdog fired meanwhile, the body's failure (its jobs were
   * cancelled) is replaced by the watchdog's one-line message.
   */
  <T> T guard(Supplier<T> body) {
    try {
      T t = body.get();
      if (failure != null) throw new IllegalArgumentException(failure);
      return t;
    } catch (Exception e) { // Spark's job-cancelled SparkException is checked, thrown from Scala undeclared
      if (failure != null && !(e instanceof IllegalArgumentException && failure.equals(e.getMessage()))) {
        throw new IllegalArgumentException(failure, e);
      }
      throw e; // precise rethrow: the body declares no checked exception, so this rethrows what it threw
    }
  }

  /** The message of a failure, or null while none. */
  String failure() {
    return failure;
  }

  private void checkSafely() {
    try {
      check(System.nanoTime());
    } catch (RuntimeException e) {
      LOG.debug("resource watchdog check failed; trying again", e);
    }
  }

  void check(long nowNanos) {
    if (failure != null) return;
    List<ExecutorSummary> executors = new ArrayList<>();
    for (ExecutorSummary e : CollectionConverters.asJava(sc.statusStore().executorList(true))) {
      if (!e.id().equals("driver")) executors.add(e);
    }
    for (StageData stage : CollectionConverters.asJava(sc.statusStore().activeStages())) {
      Map<String, Double> asks = taskAsks(sc.resourceProfileManager().resourceProfileFromId(stage.resourceProfileId()));
      boolean started = stage.numActiveTasks() > 0 || stage.numCompleteTasks() > 0 || stage.numFailedTasks() > 0;
      if (started || executors.stream().anyMatch(e -> fits(e, asks))) {
        waitingSince.remove(stage.stageId());
        continue;
      }
      long since = waitingSince.computeIfAbsent(stage.stageId(), id -> nowNanos);
      if (nowNanos - since >= TimeUnit.SECONDS.toNanos(waitSeconds)) {
        fire(message(waitSeconds, stage.name(), asks, executors.size(), offers(executors)));
        return;
      }
    }
  }

  private void fire(String message) {
    failure = message;
    LOG.error(message);
    sc.cancelAllJobs();
  }

  /** What one task of a profile asks for: cpus and every custom resource, by name. */
  static Map<String, Double> taskAsks(ResourceProfile rp) {
    Map<String, Double> m = new TreeMap<>();
    for (Map.Entry<String, TaskResourceRequest> e : CollectionConverters.asJava(rp.taskResources()).entrySet()) {
      m.put(e.getKey(), e.getValue().amount());
    }
    return m;
  }

  /** True when the executor has the cores and at least the addresses a task of {@code asks} needs. */
  static boolean fits(ExecutorSummary e, Map<String, Double> asks) {
    Map<String, ResourceInformation> has = CollectionConverters.asJava(e.resources());
    for (Map.Entry<String, Double> a : asks.entrySet()) {
      if (a.getKey().equals(ResourceProfile.CPUS())) {
        if (e.totalCores() < a.getValue()) return false;
        continue;
      }
      ResourceInformation r = has.get(a.getKey());
      if (r == null || r.addresses().length < Math.ceil(a.getValue())) return false;
    }
    return true;
  }

  /** What the live executors offer, e.g. "executor 0: 1 cores", for the message. */
  private static List<String> offers(List<ExecutorSummary> executors) {
    List<String> l = new ArrayList<>();
    for (ExecutorSummary e : executors) {
      StringBuilder sb = new StringBuilder("executor " + e.id() + ": " + e.totalCores() + " cores");
      for (Map.Entry<String, ResourceInformation> r : CollectionConverters.asJava(e.resources()).entrySet()) {
        sb.append(", ").append(r.getValue().addresses().length).append(' ').append(r.getKey());
      }
      l.add(sb.toString());
    }
    return l;
  }

  /** The one line a user reads: what waited, for what, what the executors have, and the fix. */
  static String message(int waitSeconds, String stage, Map<String, Double> asks, int executors, List<String> offers) {
    StringBuilder want = new StringBuilder();
    for (Map.Entry<String, Double> a : asks.entrySet()) {
      if (want.length() > 0) want.append(" + ");
      want.append(String.format(Locale.ROOT, "%s %s", trim(a.getValue()), a.getKey()));
    }
    boolean custom = asks.keySet().stream().anyMatch(k -> !k.equals(ResourceProfile.CPUS()));
    String have = executors == 0 ? "no executor registered" : executors + " executors (" + String.join("; ", offers) + ")";
    String fix = custom
        ? "without GPUs remove spark.executor.resource.gpu.amount, spark.task.resource.gpu.amount and "
            + "spark.longsieve.inferenceGpuAmount (conf/spark-defaults.conf ships with them commented out); with GPUs "
            + "check spark.executor.resource.gpu.discoveryScript on the workers"
        : "executors larger than any worker never start: lower spark.executor.cores / spark.executor.memory "
            + "(+ memoryOverhead), or check that the cluster has free capacity";
    return "no executor offered what the tasks of stage '" + stage + "' ask for (" + want + " per task) for "
        + waitSeconds + " s; " + have + ". Fix: " + fix + "; spark.longsieve.resourceWaitSeconds=" + waitSeconds
        + " sets this limit (0 waits forever)";
  }

  private static String trim(double d) {
    return d == Math.rint(d) ? Long.toString((long) d) : Double.toString(d);
  }

  @Override
  public void close() {
    if (timer != null) timer.shutdownNow();
  }
}
