package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The job's metrics reach Spark's metrics system: a local run with the plugin, the UI and Spark's
 * PrometheusServlet sink on (the settings docs/cluster.md gives), scraped over HTTP after the run,
 * shows the documents by status, the tokens, the latency histograms and the run-level gauges.
 */
class MetricsPrometheusTest {

  @TempDir
  static Path dir;

  static String scrape(String url) throws IOException, InterruptedException {
    HttpResponse<String> r = HttpClient.newBuilder().followRedirects(HttpClient.Redirect.NORMAL).build().send(HttpRequest.newBuilder(URI.create(url)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, r.statusCode(), url);
    return r.body();
  }

  /** The value of the first Prometheus sample whose name contains {@code part}, or -1. */
  static double value(String body, String part) {
    Matcher m = Pattern.compile("(?m)^(\\S*" + Pattern.quote(part) + "\\S*?)(\\{[^}]*\\})? (\\S+)$").matcher(body);
    return m.find() ? Double.parseDouble(m.group(3)) : -1;
  }

  static double delta(String before, String after, String metric) {
    return value(after, "LongSievePlugin_" + metric) - Math.max(0, value(before, "LongSievePlugin_" + metric));
  }

  @Test
  void aLocalRunsMetricsAreScrapedFromSparksPrometheusEndpoint() throws Exception {
    SparkSession.getDefaultSession().foreach(s -> {
      s.stop();
      return null;
    });
    SparkSession spark = SparkSession.builder().master("local[2]").appName("longsieve-metrics-test")
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", "0")
        .config("spark.sql.shuffle.partitions", "2")
        .config(LongSievePlugin.conf().getKey(), LongSievePlugin.conf().getValue())
        .config("spark.metrics.conf.*.sink.prometheusServlet.class", "org.apache.spark.metrics.sink.PrometheusServlet")
        .config("spark.metrics.conf.*.sink.prometheusServlet.path", "/metrics/prometheus")
        .getOrCreate();
    try {
      String url = spark.sparkContext().uiWebUrl().get() + "/metrics/prometheus";
      String before = scrape(url);
      assertTrue(before.contains("LongSievePlugin_documents_ok"), "registered before any document:\n" + before);
      Path input = JobTestSupport.jsonl(dir, "docs.jsonl",
          JobTestSupport.json("a", "summary", "The council met on Monday.", null),
          JobTestSupport.json("b", "summary", "The bridge reopened in spring.", null),
          JobTestSupport.json("c", "summary", "The market moved to the station.", null));
      RunSummary s = LongSieveJob.run(spark, JobTestSupport.options(input, dir.resolve("out"), "metrics",
          Map.of("spark.longsieve.maxDocs", "2")));
      String body = scrape(url);
      // the metrics count per JVM, and other tests ran documents in this one: compare with before the run
      assertEquals(2.0, delta(before, body, "documents_ok_Count"), body);
      assertEquals(1.0, delta(before, body, "documents_budget_exceeded_Count"), body);
      assertEquals((double) s.inputTokens(), delta(before, body, "tokens_in_Count"), body);
      assertEquals((double) s.outputTokens(), delta(before, body, "tokens_out_Count"), body);
      for (String h : new String[] {"ttft_ms", "prefill_ms", "decode_ms", "context_tokens", "selected_fraction_permille",
          "kv_bytes_before", "kv_bytes_after"}) {
        assertEquals(2.0, delta(before, body, h + "_Count"), h + " in\n" + body);
      }
      assertEquals(3.0, value(body, "LongSievePlugin_run_documents"), body);
      assertEquals(1.0, value(body, "LongSievePlugin_run_budget_exceeded"), body);
      assertTrue(value(body, "LongSievePlugin_engine_peak_batch") >= 1, body);
      // the engine's device memory: this run is on the CPU, which holds none
      assertEquals(0.0, value(body, "LongSievePlugin_engine_gpu_memory_used_bytes"), body);
    } finally {
      spark.stop();
    }
  }
}
