package io.longsieve.job;

import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.Engine;
import io.longsieve.engine.EngineCounters;
import io.longsieve.engine.spi.EngineSpec;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.spark.TaskContext;

/**
 * Holds this executor JVM's engines, one per {@link EngineSpec} (in practice one per run and GPU).
 *
 * <p>Failure semantics: a spec whose engine fails to open (unreadable or bad checkpoint, CUDA asked
 * for but unusable) throws from {@link #get}; nothing is cached, so the task fails and Spark's task
 * retry opens it again, and after spark.task.maxFailures the job fails with the engine's message,
 * because no document of the run could succeed. Per-document failures never reach this class: the
 * caller turns them into error rows. An engine is opened at most once per spec and JVM, lazily by the
 * first task that needs it, under a lock so concurrent tasks wait for that one opening and then share
 * the engine ({@link Engine#generate} is thread-safe, and the engine batches the tasks' concurrent
 * requests on its device). Engines are closed by a JVM shutdown hook when
 * the executor exits.
 */
public final class ExecutorEngine {
  private ExecutorEngine() {}

  private static final Logger LOG = LogManager.getLogger(ExecutorEngine.class);
  private static final Object LOCK = new Object();
  private static final Map<EngineSpec, Engine> ENGINES = new LinkedHashMap<>(); // guarded by LOCK
  private static final AtomicInteger OPENINGS = new AtomicInteger();
  private static boolean hookInstalled; // guarded by LOCK
  private static volatile int executorGpu = -1; // the executor's GPU ordinal from LongSievePlugin; -1: none

  /**
   * The engine for {@code spec} in this JVM, opened on first use. Inside a Spark task that was given
   * a GPU (spark.task.resource.gpu.amount), the spec is bound to that GPU first: Spark's address,
   * remapped to a CUDA ordinal through CUDA_VISIBLE_DEVICES ({@link GpuBinding}).
   */
  public static Engine get(EngineSpec spec) {
    EngineSpec bound = bindToTaskGpu(ModelCache.localized(spec)); // a model URI: its local copy
    synchronized (LOCK) {
      Engine e = ENGINES.get(bound);
      if (e == null) {
        LOG.info("opening engine for " + bound);
        e = Backends.open(bound);
        OPENINGS.incrementAndGet();
        ENGINES.put(bound, e);
        if (!hookInstalled) {
          Runtime.getRuntime().addShutdownHook(new Thread(ExecutorEngine::closeAll, "longsieve-engine-close"));
          hookInstalled = true;
        }
      }
      return e;
    }
  }

  /** How many engines this JVM has opened since it started (or since {@link #closeAll}). */
  public static int openings() {
    return OPENINGS.get();
  }

  /** Each open engine's scheduler counters (requests, batched decode steps, peak batch), in opening order. */
  public static List<EngineCounters> counters() {
    synchronized (LOCK) {
      return ENGINES.values().stream().map(Engine::counters).toList();
    }
  }

  /** Logs each open engine's counters (documents run, decode steps batched, peak batch) at INFO. */
  static void logCounters(String when) {
    for (EngineCounters c : counters()) LOG.info("{}: engine {}", when, c);
    List<io.longsieve.engine.PrefixCounters> prefixes;
    synchronized (LOCK) {
      prefixes = ENGINES.values().stream().map(Engine::prefixCounters).toList();
    }
    for (var p : prefixes) if (p.kept() > 0) LOG.info("{}: prefix reuse {}", when, p);
  }

  /** Closes every engine; a later {@link #get} opens afresh. Used by the shutdown hook and by tests. */
  static void closeAll() {
    List<Engine> open;
    synchronized (LOCK) {
      open = List.copyOf(ENGINES.values());
      ENGINES.clear();
      OPENINGS.set(0);
    }
    for (Engine e : open) {
      try {
        // the one place an operator sees, per executor, how many documents the engine ran together
        LOG.info("closing engine: " + e.counters());
        e.close();
      } catch (RuntimeException ex) {
        LOG.warn("closing engine: " + ex);
      }
    }
  }

  /** Records the executor's own GPU (LongSievePlugin), used when a task carries no GPU address. */
  static void bindExecutorGpu(int ordinal) {
    executorGpu = ordinal;
  }

  /**
   * The spec bound to the GPU Spark gave this task (spark.task.resource.gpu.amount), else to the
   * executor's GPU when LongSievePlugin recorded one.
   */
  static EngineSpec bindToTaskGpu(EngineSpec spec) {
    if (spec.gpuOrdinal() >= 0 || spec.device().equals("cpu")) return spec;
    int ordinal = TaskContext.get() == null ? -1 : GpuBinding.forCurrentTask(); // remapped through CUDA_VISIBLE_DEVICES
    if (ordinal < 0) ordinal = executorGpu;
    return ordinal < 0 ? spec : spec.withGpuOrdinal(ordinal);
  }
}
