package io.longsieve.job;

import com.codahale.metrics.Counter;
import com.codahale.metrics.ExponentiallyDecayingReservoir;
import com.codahale.metrics.Gauge;
import com.codahale.metrics.Histogram;
import com.codahale.metrics.Metric;
import com.codahale.metrics.MetricRegistry;
import io.longsieve.bootstrap.Backends;
import io.longsieve.engine.EngineCounters;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.sql.Row;

/**
 * The job's metrics in Spark's metrics system (Codahale), one set per JVM: executors count the
 * documents they run, the driver sets the run-level figures. {@link LongSievePlugin} registers them
 * through {@code PluginContext.metricRegistry()}, Spark's supported way for plugins, so they appear
 * under the source {@code plugin.io.longsieve.job.LongSievePlugin} in every sink (PrometheusServlet,
 * JMX, Graphite, ...); without the plugin they are kept but not reported.
 *
 * <p>Names (under that source): {@code documents.<status>} counters (one per status),
 * {@code tokens.in}, {@code tokens.out}; histograms of ok documents {@code ttft_ms},
 * {@code prefill_ms}, {@code decode_ms}, {@code context_tokens} (prompt tokens),
 * {@code output_tokens_per_s} (decode tokens / decode seconds), {@code selected_fraction_permille}
 * (mean over layers, x1000), {@code selection_cache_hit_rate_permille}, {@code kv_bytes_before},
 * {@code kv_bytes_after}; gauges of the executor's engines {@code engine.mean_batch_x1000},
 * {@code engine.peak_batch}, {@code engine.kv_reserved_peak_bytes} (0 before an engine opens),
 * {@code engine.gpu_memory_used_bytes} (device memory the engine holds, its own accounting; 0 on the CPU), and of
 * the run on the driver {@code run.documents}, {@code run.budget_exceeded},
 * {@code run.audit_documents}, {@code run.audit_agreement_permille} (mean token F1 x1000 of the
 * shadow audit; -1 without an audit), {@code run.audit_kl_mean_micronats} and {@code run.audit_kl_max_micronats}
 * (the audit's mean and largest KL(dense ‖ policy) x10^6; -1 without), {@code run.audit_top1_agreement_permille}
 * (its top-1 agreement x1000; -1 without). Histograms and gauges take longs, hence per-mille and micro-units.
 *
 * <p>Failure semantics: recording never throws into the document's task; a row without engine
 * stats only counts by status.
 */
public final class LongSieveMetrics {
  private LongSieveMetrics() {}

  private static final Map<String, Metric> METRICS = new LinkedHashMap<>();
  private static final Map<String, Counter> BY_STATUS = new LinkedHashMap<>();
  static final Counter TOKENS_IN = counter("tokens.in");
  static final Counter TOKENS_OUT = counter("tokens.out");
  static final Histogram TTFT_MS = histogram("ttft_ms");
  static final Histogram PREFILL_MS = histogram("prefill_ms");
  static final Histogram DECODE_MS = histogram("decode_ms");
  static final Histogram CONTEXT_TOKENS = histogram("context_tokens");
  static final Histogram TOKENS_PER_S = histogram("output_tokens_per_s");
  static final Histogram SELECTED_PERMILLE = histogram("selected_fraction_permille");
  static final Histogram CACHE_HIT_PERMILLE = histogram("selection_cache_hit_rate_permille");
  static final Histogram KV_BEFORE = histogram("kv_bytes_before");
  static final Histogram KV_AFTER = histogram("kv_bytes_after");
  static final AtomicLong RUN_DOCUMENTS = new AtomicLong();
  static final AtomicLong RUN_BUDGET_EXCEEDED = new AtomicLong();
  static final AtomicLong RUN_AUDIT_DOCUMENTS = new AtomicLong();
  static final AtomicLong RUN_AUDIT_PERMILLE = new AtomicLong(-1);
  static final AtomicLong RUN_AUDIT_KL_MEAN_MICRO = new AtomicLong(-1);
  static final AtomicLong RUN_AUDIT_KL_MAX_MICRO = new AtomicLong(-1);
  static final AtomicLong RUN_AUDIT_TOP1_PERMILLE = new AtomicLong(-1);

  static {
    for (String s : JobSchemas.STATUSES) BY_STATUS.put(s, counter("documents." + s));
    gauge("engine.mean_batch_x1000", () -> {
      long steps = 0;
      long tokens = 0;
      for (EngineCounters c : ExecutorEngine.counters()) {
        steps += c.decodeSteps();
        tokens += c.decodedTokens();
      }
      return steps == 0 ? 0L : 1000 * tokens / steps;
    });
    gauge("engine.peak_batch", () -> (long) ExecutorEngine.counters().stream().mapToInt(EngineCounters::peakBatch).max().orElse(0));
    gauge("engine.kv_reserved_peak_bytes",
        () -> ExecutorEngine.counters().stream().mapToLong(EngineCounters::peakKvReservedBytes).max().orElse(0));
    gauge("engine.gpu_memory_used_bytes", Backends::deviceMemoryUsedBytes);
    gauge("run.documents", RUN_DOCUMENTS::get);
    gauge("run.budget_exceeded", RUN_BUDGET_EXCEEDED::get);
    gauge("run.audit_documents", RUN_AUDIT_DOCUMENTS::get);
    gauge("run.audit_agreement_permille", RUN_AUDIT_PERMILLE::get);
    gauge("run.audit_kl_mean_micronats", RUN_AUDIT_KL_MEAN_MICRO::get);
    gauge("run.audit_kl_max_micronats", RUN_AUDIT_KL_MAX_MICRO::get);
    gauge("run.audit_top1_agreement_permille", RUN_AUDIT_TOP1_PERMILLE::get);
  }

  private static Counter counter(String name) {
    Counter c = new Counter();
    METRICS.put(name, c);
    return c;
  }

  private static Histogram histogram(String name) {
    Histogram h = new Histogram(new ExponentiallyDecayingReservoir());
    METRICS.put(name, h);
    return h;
  }

  private static void gauge(String name, Gauge<Long> g) {
    METRICS.put(name, g);
  }

  /** Adds every metric to a plugin's registry (names as in the class comment). */
  static void registerAll(MetricRegistry registry) {
    synchronized (METRICS) {
      METRICS.forEach(registry::register);
    }
  }

  /** The metric names (tests, docs). */
  public static java.util.Set<String> names() {
    return java.util.Collections.unmodifiableSet(METRICS.keySet());
  }

  /** Counts one finished RESULT row (executor side). */
  static void record(Row r) {
    try {
      String status = r.getAs("status");
      Counter c = BY_STATUS.get(status);
      if (c != null) c.inc();
      Integer in = r.getAs("input_tokens");
      Integer out = r.getAs("output_tokens");
      Double ttft = r.getAs("ttft_ms");
      if (ttft == null) return; // the engine did not run
      if (in != null) {
        TOKENS_IN.inc(in);
        CONTEXT_TOKENS.update(in);
      }
      if (out != null) TOKENS_OUT.inc(out);
      TTFT_MS.update(Math.round(ttft));
      Double prefill = r.getAs("prefill_ms");
      Double decode = r.getAs("decode_ms");
      if (prefill != null) PREFILL_MS.update(Math.round(prefill));
      if (decode != null) {
        DECODE_MS.update(Math.round(decode));
        if (out != null && out > 1 && decode > 0) TOKENS_PER_S.update(Math.round((out - 1) / (decode / 1000)));
      }
      java.util.List<Float> sel = r.getList(r.fieldIndex("selected_fraction_by_layer"));
      if (sel != null && !sel.isEmpty()) {
        double sum = 0;
        for (Float f : sel) sum += f;
        SELECTED_PERMILLE.update(Math.round(1000 * sum / sel.size()));
      }
      Double hit = r.getAs("selection_cache_hit_rate");
      if (hit != null && !hit.isNaN()) CACHE_HIT_PERMILLE.update(Math.round(1000 * hit));
      Long before = r.getAs("kv_bytes_before");
      Long after = r.getAs("kv_bytes_after");
      if (before != null) KV_BEFORE.update(before);
      if (after != null) KV_AFTER.update(after);
    } catch (RuntimeException e) {
      // metrics are for watching; a row they cannot read must not fail its document
    }
  }

  /** {@code v × scale} rounded, or -1 for NaN (not measured). */
  private static long scaled(double v, double scale) {
    return Double.isNaN(v) ? -1 : Math.round(v * scale);
  }

  /** The driver's run-level figures, set when a run ends. */
  static void recordRun(RunSummary s, ShadowAudit.Agreement audit) {
    RUN_DOCUMENTS.set(s.rows());
    RUN_BUDGET_EXCEEDED.set(s.byStatus().getOrDefault(JobSchemas.BUDGET_EXCEEDED, 0L));
    if (audit != null) {
      RUN_AUDIT_DOCUMENTS.set(audit.documents());
      RUN_AUDIT_PERMILLE.set(Double.isNaN(audit.meanTokenF1()) ? -1 : Math.round(1000 * audit.meanTokenF1()));
      RUN_AUDIT_KL_MEAN_MICRO.set(scaled(audit.klMean(), 1e6));
      RUN_AUDIT_KL_MAX_MICRO.set(scaled(audit.klMax(), 1e6));
      RUN_AUDIT_TOP1_PERMILLE.set(scaled(audit.top1Agreement(), 1000));
    }
  }
}
