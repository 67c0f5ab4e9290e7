package io.longsieve.job;

import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Logger;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * Optional Spark plugin ({@code spark.plugins=io.longsieve.job.LongSievePlugin}) that gives each
 * executor's engine its GPU from the executor's own resources ({@link PluginContext#resources()})
 * rather than from each task's, and closes the executor's engines when the executor shuts down.
 *
 * <p>Failure semantics: a GPU address that cannot be mapped through CUDA_VISIBLE_DEVICES fails the
 * executor's start ({@link GpuBinding} says why), so Spark replaces it instead of running tasks on
 * a guessed device; an executor without a GPU resource (CPU clusters, local mode) gets no binding
 * and tasks bind as without the plugin. Closing an engine at shutdown never throws.
 *
 * <p>Metrics: the executor and the driver side each register {@link LongSieveMetrics} in the
 * plugin's metric registry, Spark's supported way for a plugin to add a metrics source (named
 * {@code plugin.io.longsieve.job.LongSievePlugin}). In local mode both sides share one metrics
 * system; the second registration of the same source is refused by Spark with an INFO line, and
 * the first already holds every metric.
 *
 * <p>Why: with stage-level scheduling off, tasks ask for no GPU (spark.task.resource.gpu.amount
 * unset) and TaskContext carries no address, yet the executor owns one GPU; and a plugin closes the
 * CUDA context before the JVM's shutdown hooks race the driver's kill.
 */
public final class LongSievePlugin implements SparkPlugin {

  private static final Logger LOG = Logger.getLogger(LongSievePlugin.class.getName());
  private static final AtomicInteger EXECUTOR_STARTS = new AtomicInteger();

  /** How many times an executor plugin started in this JVM (tests). */
  public static int executorStarts() {
    return EXECUTOR_STARTS.get();
  }

  /** The driver's side registers the job's metrics ({@link LongSieveMetrics}): run-level gauges live there. */
  @Override
  public DriverPlugin driverPlugin() {
    return new DriverPlugin() {
      @Override
      public void registerMetrics(String appId, PluginContext ctx) {
        LongSieveMetrics.registerAll(ctx.metricRegistry());
      }
    };
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new ExecutorPlugin() {
      @Override
      public void init(PluginContext ctx, Map<String, String> extraConf) {
        int ordinal = GpuBinding.ordinalFor(ctx.resources(), System.getenv("CUDA_VISIBLE_DEVICES"));
        ExecutorEngine.bindExecutorGpu(ordinal);
        EXECUTOR_STARTS.incrementAndGet();
        // Spark registers the plugin's registry with the executor's metrics system after init
        LongSieveMetrics.registerAll(ctx.metricRegistry());
        LOG.info("executor " + ctx.executorID() + ": " + GpuBinding.describe(ctx.resources()) + " -> CUDA ordinal "
            + ordinal);
      }

      @Override
      public void shutdown() {
        ExecutorEngine.closeAll();
      }
    };
  }

  /** The conf key and value that turn the plugin on (tests, docs). */
  public static Map.Entry<String, String> conf() {
    return Map.entry("spark.plugins", LongSievePlugin.class.getName());
  }
}
