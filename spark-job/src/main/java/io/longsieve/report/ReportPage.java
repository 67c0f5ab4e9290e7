package io.longsieve.report;

import io.longsieve.report.BarChart.Bar;
import io.longsieve.report.Histogram.Marker;
import io.longsieve.report.RunAggregates.Distribution;
import io.longsieve.report.RunAggregates.ErrorRow;
import io.longsieve.report.RunAggregates.EvalRow;
import io.longsieve.report.RunAggregates.ExecutorRow;
import io.longsieve.report.RunAggregates.PartitionRow;
import io.longsieve.report.RunAggregates.PolicyRow;
import io.longsieve.report.RunAggregates.Summary;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Renders {@link RunAggregates} and the run manifest as one self-contained HTML page: inline CSS, inline SVG charts, no
 * script and no network. Every string that came from data is escaped.
 */
final class ReportPage {

  private final RunAggregates a;
  private final ManifestFields manifest;
  private final StringBuilder h = new StringBuilder(64 * 1024);

  private ReportPage(RunAggregates a, ManifestFields manifest) {
    this.a = a;
    this.manifest = manifest;
  }

  static String render(RunAggregates a, ManifestFields manifest, Instant generatedAt) {
    return render(a, manifest, generatedAt, RunOverview.Data.EMPTY);
  }

  /** The page, with the overview ({@link RunOverview}: what ran, budget, audit, tasks and answers) first. */
  static String render(RunAggregates a, ManifestFields manifest, Instant generatedAt, RunOverview.Data overview) {
    return render(a, manifest, generatedAt, overview, StructuredOutputs.Data.EMPTY);
  }

  /** The page with the structured-output section ({@link StructuredOutputs}) after the overview, for runs that have one. */
  static String render(RunAggregates a, ManifestFields manifest, Instant generatedAt, RunOverview.Data overview,
      StructuredOutputs.Data structured) {
    ReportPage p = new ReportPage(a, manifest);
    p.head(generatedAt);
    p.h.append(RunOverview.header(manifest)).append(RunOverview.budget(manifest));
    p.summary();
    p.h.append(RunOverview.audit(manifest));
    if (!overview.tasks().isEmpty()) p.h.append(RunOverview.tasks(overview));
    p.h.append(StructuredOutputs.html(structured));
    p.latency();
    p.throughput();
    p.layers();
    p.policies();
    p.errors();
    p.executors();
    p.h.append("</main></body></html>\n");
    return p.h.toString();
  }

  private void head(Instant generatedAt) {
    String title = "LongSieve run " + a.runId();
    h.append("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
        .append("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
        .append("<title>").append(Html.escape(title)).append("</title><style>").append(CSS).append("</style></head>")
        .append("<body><main><h1>").append(Html.escape(title)).append("</h1><p class=\"muted\">Report generated ")
        .append(Html.escape(generatedAt.truncatedTo(ChronoUnit.SECONDS).toString()))
        .append(" from the run's stats and outputs Parquet. Hover a mark for its value.</p>");
  }

  private void summary() {
    Summary s = a.summary();
    double wallMs = manifest.wallMs();
    double wallS = wallMs / 1000;
    long ok = s.byStatus().getOrDefault(RunAggregator.OK, 0L);
    section("summary", "Run summary");
    h.append("<div class=\"cards\">");
    card("documents", Html.num(s.documents()));
    card("ok", Html.num(ok) + (s.documents() > 0 ? " (" + Html.pct((double) ok / s.documents()) + ")" : ""));
    card("not ok (any other status)", Html.num(s.documents() - ok) + (s.documents() > 0 ? " (" + Html.pct((double) (s.documents() - ok) / s.documents()) + ")" : ""));
    card("wall time", Double.isNaN(wallMs) ? "not in manifest" : Html.duration(wallMs));
    card("documents / s (÷ run wall time)", Html.num(s.documents() / wallS));
    card("tokens / s (input + output, ÷ run wall time)", Html.num((s.inputTokens() + s.outputTokens()) / wallS));
    card("output tokens / s (÷ run wall time)", Html.num(s.outputTokens() / wallS));
    card("input tokens", Html.num(s.inputTokens()));
    RunAggregates.PrefixSaving reuse = s.prefixReuse();
    if (reuse.rows() > 0) { // prefix reuse: prompt tokens not prefilled again, and about how long that would have taken
      card("prefill saved by prefix reuse", Html.num(reuse.tokens()) + " tokens"
          + (s.inputTokens() > 0 ? " (" + Html.pct((double) reuse.tokens() / s.inputTokens()) + " of input)" : "")
          + " in " + Html.num(reuse.rows()) + " documents"
          + (Double.isNaN(reuse.prefillMsSaved()) ? "" : ", ≥ " + Html.duration(reuse.prefillMsSaved()) + " of prefill"));
    }
    h.append("</div><div class=\"grid\"><div>");
    List<Bar> bars = new ArrayList<>();
    s.byStatus().forEach((k, v) -> bars.add(new Bar(k, v, k + ": " + Html.num(v) + " documents")));
    h.append("<h3>Documents by status</h3>").append(BarChart.render("status", "Documents by status", bars,
        "documents", 1));
    h.append("</div><div><h3>Backends and devices</h3><table><tr><th>backend</th><th>device</th>"
        + "<th class=\"n\">documents</th></tr>");
    s.backends().forEach(b -> row(b.backend(), b.device(), Html.num(b.documents())));
    h.append("</table>");
    Map<String, String> fields = manifest.scalars();
    if (!fields.isEmpty()) {
      h.append("<details><summary>Run manifest</summary><table>");
      fields.forEach((k, v) -> row(k, Html.truncate(v, 200)));
      h.append("</table></details>");
    } else if (manifest.torn() != null) {
      h.append("<p class=\"unfinished\" id=\"torn-manifest\">The run manifest ").append(Html.escape(manifest.torn()))
          .append(": this report is made from the tables alone (").append(Html.num(s.documents()))
          .append(" documents). Throughput needs the manifest's wall time.</p>");
    } else {
      // the manifest is written last: without it the run was killed (or is still running)
      h.append("<p class=\"unfinished\">No run manifest (runs/").append(Html.escape(a.runId()))
          .append(".json): this run did not finish, or is still running. Its tables hold the ")
          .append(Html.num(s.documents())).append(" documents it committed; a run with --resume on the same output "
          + "runs the rest. Throughput needs the manifest's wall time.</p>");
    }
    h.append("</div></div></section>");
  }

  private void latency() {
    section("latency", "Latency");
    h.append("<table><tr><th></th><th class=\"n\">documents</th><th class=\"n\">mean</th>");
    for (String q : Quantiles.NAMES) h.append("<th class=\"n\">").append(q).append("</th>");
    h.append("<th class=\"n\">max</th></tr>");
    latencyRow("total per document", a.totalMs());
    latencyRow("time to first token", a.ttftMs());
    h.append("</table><div class=\"grid\">");
    histogram("hist-total", "Total time per document", a.totalMs(), "total ms");
    histogram("hist-ttft", "Time to first token", a.ttftMs(), "ttft ms");
    h.append("</div></section>");
  }

  private void latencyRow(String name, Distribution d) {
    List<String> cells = new ArrayList<>(List.of(name, Html.num(d.count()), Html.duration(d.mean())));
    for (String q : Quantiles.NAMES) cells.add(Html.duration(d.q(q)));
    cells.add(Html.duration(d.max()));
    row(cells.toArray(String[]::new));
  }

  private void histogram(String kind, String title, Distribution d, String xLabel) {
    h.append("<div><h3>").append(Html.escape(title)).append("</h3>");
    if (d.count() == 0) {
      h.append("<p class=\"muted\">No values.</p></div>");
      return;
    }
    h.append(Histogram.render(kind, title, d.edges(), d.counts(), d.logBins(), xLabel,
        List.of(new Marker("p50", d.q("p50")), new Marker("p95", d.q("p95")), new Marker("p99", d.q("p99")))));
    if (d.max() > d.edges()[d.edges().length - 1]) {
      h.append("<p class=\"muted\">The last bin also holds the documents slower than ")
          .append(Html.escape(Html.duration(d.edges()[d.edges().length - 1]))).append(".</p>");
    }
    h.append("</div>");
  }

  private void throughput() {
    section("throughput", "Tokens per second against input length");
    h.append("<p class=\"muted\">One dot per document (a sample of at most ").append(RunAggregator.SCATTER_CAP)
        .append("); the line is the median of all documents per half-octave of input length (where a half-octave holds at"
        + " least " + RunAggregator.MEDIAN_MIN + ").</p><div class=\"grid\">");
    scatter("scatter-decode", "Decode speed (output tokens after the first ÷ decode time)", a.decodeRate(), "decode tokens / s");
    scatter("scatter-prefill", "Prefill speed (input tokens ÷ prefill time)", a.prefillRate(), "prefill tokens / s");
    h.append("</div></section>");
  }

  private void scatter(String kind, String title, List<ScatterChart.Series> series, String yLabel) {
    h.append("<div><h3>").append(Html.escape(title)).append("</h3>");
    h.append(series.isEmpty() ? "<p class=\"muted\">No documents with timings.</p>"
        : ScatterChart.render(kind, title, series, "input tokens", yLabel, true));
    h.append("</div>");
  }

  private void layers() {
    section("layers", "Selected fraction per layer");
    var l = a.layers();
    if (l.policies().isEmpty() || l.layers() == 0) {
      h.append("<p class=\"muted\">No per-layer selection recorded (dense attention attends to every token).</p>");
    } else {
      h.append("<p class=\"muted\">Mean fraction of cached tokens each layer attended to, per policy.</p>");
      List<String> cols = new ArrayList<>();
      for (int i = 0; i < l.layers(); i++) {
        cols.add(Integer.toString(i));
      }
      h.append(Heatmap.render("heatmap-layers", "Selected fraction per layer", l.policies(), cols, l.means(),
          "layer"));
    }
    h.append("</section>");
  }

  private void policies() {
    section("policies", "Policies compared");
    h.append("<table><tr><th>policy</th><th class=\"n\">documents</th><th class=\"n\">ok</th>"
        + "<th class=\"n\">p50 total</th><th class=\"n\">p95 total</th><th class=\"n\">mean ttft</th>"
        + "<th class=\"n\">prefill tok/s (input tokens ÷ prefill time)</th><th class=\"n\">decode tok/s (output tokens after the first ÷ decode time)</th><th class=\"n\">attended tokens</th>"
        + "<th class=\"n\">cache hits</th><th class=\"n\">KV kept</th><th class=\"n\">selection share</th></tr>");
    List<Bar> p50 = new ArrayList<>();
    List<Bar> decode = new ArrayList<>();
    for (PolicyRow p : a.policies()) {
      row(p.policy(), Html.num(p.documents()), Html.num(p.ok()), Html.duration(p.totalMs().get("p50")),
          Html.duration(p.totalMs().get("p95")), Html.duration(p.meanTtftMs()), Html.num(p.prefillTokPerS()),
          Html.num(p.decodeTokPerS()), Html.num(p.attendedTokensMean()), Html.pct(p.cacheHitRate()),
          Html.pct(p.kvRatio()), Html.pct(p.selectionShare()));
      p50.add(new Bar(p.policy(), p.totalMs().get("p50"), null));
      decode.add(new Bar(p.policy(), p.decodeTokPerS(), null));
    }
    h.append("</table><div class=\"grid\"><div><h3>p50 total time per document</h3>")
        .append(BarChart.render("policy-p50", "p50 total ms per policy", p50, "ms", 1))
        .append("</div><div><h3>Decode tokens per second</h3>")
        .append(BarChart.render("policy-decode", "Decode tokens/s per policy", decode, "tokens / s", 1))
        .append("</div></div>");
    eval();
    h.append("</section>");
  }

  private void eval() {
    if (a.eval() == null || a.eval().rows().isEmpty()) {
      h.append("<h3>Accuracy</h3><p class=\"muted\">No eval results for this run (longsieve eval writes them"
          + " under eval/results).</p>");
      return;
    }
    if (!a.eval().runId().equals(a.runId())) {
      h.append("<p class=\"muted\">Accuracy from eval run ").append(Html.escape(a.eval().runId())).append(".</p>");
    }
    // mean accuracy per policy, and a (policy × task, length) heatmap
    Map<String, double[]> perPolicy = new TreeMap<>();
    Map<String, Map<Long, Double>> cells = new TreeMap<>();
    TreeSet<Long> lengths = new TreeSet<>();
    for (EvalRow r : a.eval().rows()) {
      double[] acc = perPolicy.computeIfAbsent(r.policy(), k -> new double[2]);
      acc[0] += r.accuracy();
      acc[1]++;
      cells.computeIfAbsent(r.policy() + " · " + r.task(), k -> new TreeMap<>()).put(r.length(), r.accuracy());
      lengths.add(r.length());
    }
    List<Bar> bars = new ArrayList<>();
    perPolicy.forEach((k, v) -> bars.add(new Bar(k, v[0] / v[1], k + ": " + Html.pct(v[0] / v[1]))));
    List<String> rowLabels = new ArrayList<>(cells.keySet());
    List<String> colLabels = lengths.stream().map(Html::num).toList();
    double[][] values = new double[rowLabels.size()][lengths.size()];
    for (int i = 0; i < rowLabels.size(); i++) {
      int j = 0;
      for (Long len : lengths) {
        values[i][j++] = cells.get(rowLabels.get(i)).getOrDefault(len, Double.NaN);
      }
    }
    h.append("<div class=\"grid\"><div><h3>Mean accuracy per policy</h3>")
        .append(BarChart.render("eval-policy", "Mean accuracy per policy", bars, "accuracy", 1))
        .append("</div><div><h3>Accuracy by policy, task and input length</h3>")
        .append(Heatmap.render("eval-heatmap", "Accuracy by policy, task and length", rowLabels, colLabels, values,
            "input length (tokens)"))
        .append("</div></div>");
  }

  private void errors() {
    var e = a.errors();
    section("errors", "Errors");
    if (e.documents() == 0) {
      h.append("<p>No failed documents.</p></section>");
      return;
    }
    h.append("<p>").append(Html.num(e.documents())).append(" failed documents in ").append(Html.num(e.groups()))
        .append(" groups");
    if (e.groups() > e.rows().size()) {
      h.append("; the ").append(e.rows().size()).append(" largest are shown");
    }
    h.append(". Messages that differ only in their numbers are one group; an example message is shown.</p>"
        + "<table class=\"errors\"><tr><th>status</th><th class=\"n\">documents</th><th>message (example)</th>"
        + "<th>example doc_id</th></tr>");
    for (ErrorRow r : e.rows()) {
      h.append("<tr><td>").append(Html.escape(r.status())).append("</td><td class=\"n\">")
          .append(Html.num(r.documents())).append("</td><td class=\"msg\" title=\"").append(Html.escape(r.message()))
          .append("\">").append(Html.escape(Html.truncate(r.message(), 240))).append("</td><td class=\"id\">")
          .append(Html.escape(r.exampleDocId())).append("</td></tr>");
    }
    h.append("</table></section>");
  }

  private void executors() {
    section("executors", "Executors");
    h.append("<p class=\"muted\">Busy time is the sum of the documents' total time on each executor; a long bar"
        + " among short ones is a straggler.</p><div class=\"grid\"><div><h3>Busy time per executor</h3>");
    List<Bar> busy = new ArrayList<>();
    List<Bar> rate = new ArrayList<>();
    for (ExecutorRow r : a.executors()) {
      busy.add(new Bar(r.executor(), r.busyMs() / 1000, r.executor() + ": " + Html.duration(r.busyMs()) + ", "
          + Html.num(r.documents()) + " documents in " + r.partitions() + " partitions"));
      rate.add(new Bar(r.executor(), r.tokensPerSecond(), null));
    }
    h.append(BarChart.render("executor-busy", "Busy seconds per executor", busy, "busy seconds", 0))
        .append("</div><div><h3>Tokens per busy second</h3>")
        .append(BarChart.render("executor-rate", "Tokens per busy second per executor", rate, "tokens / s", 0))
        .append("</div></div><h3>Slowest partitions</h3><table><tr><th>executor</th><th class=\"n\">partition</th>"
            + "<th class=\"n\">documents</th><th class=\"n\">busy</th></tr>");
    for (PartitionRow r : a.slowestPartitions()) {
      row(r.executor(), Integer.toString(r.partition()), Html.num(r.documents()), Html.duration(r.busyMs()));
    }
    h.append("</table></section>");
  }

  private void section(String id, String title) {
    h.append("<section id=\"").append(id).append("\"><h2>").append(Html.escape(title)).append("</h2>");
  }

  private void card(String label, String value) {
    h.append("<div class=\"card\"><div class=\"v\">").append(Html.escape(value)).append("</div><div class=\"l\">")
        .append(Html.escape(label)).append("</div></div>");
  }

  /** A table row; the first cell is text, the rest are right-aligned numbers. All cells are escaped. */
  private void row(String... cells) {
    h.append("<tr>");
    for (int i = 0; i < cells.length; i++) {
      h.append(i == 0 ? "<td>" : "<td class=\"n\">").append(Html.escape(cells[i])).append("</td>");
    }
    h.append("</tr>");
  }

  private static final String CSS = """
      body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d1d1f;background:#fafafa;margin:0}
      main{max-width:1340px;margin:0 auto;padding:16px 24px 48px}
      h1{font-size:22px;margin:8px 0 2px}h2{font-size:18px;margin:0 0 8px}h3{font-size:14px;margin:10px 0 4px}
      section{background:#fff;border:1px solid #e2e2e2;border-radius:8px;padding:14px 18px;margin:14px 0}
      .muted{color:#666;font-size:13px;margin:4px 0}
      .unfinished{border-left:4px solid #c60;padding:4px 8px;margin:6px 0;font-size:13px}
      .cards{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:8px}
      .card{border:1px solid #e2e2e2;border-radius:6px;padding:8px 12px;min-width:120px;background:#f7f9fc}
      .card .v{font-size:18px;font-weight:600}.card .l{color:#666;font-size:12px}
      .grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:8px 24px;align-items:start}
      svg.chart{max-width:100%;height:auto;display:block}
      svg .tick{font-size:11px;fill:#444}svg .axis{font-size:12px;fill:#222}
      svg .legend,svg .value,svg .marker{font-size:11px;fill:#222}
      table{border-collapse:collapse;margin:6px 0;font-size:13px}
      th,td{border-bottom:1px solid #eee;padding:3px 10px 3px 0;text-align:left;vertical-align:top}
      th{color:#444;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
      td.msg{max-width:640px;white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,monospace;font-size:12px}
      td.id{font-family:ui-monospace,monospace;font-size:12px;word-break:break-all}
      details{margin-top:8px}summary{cursor:pointer;color:#0b57d0}
      .runhead span{margin-right:18px;font-size:13px}.runhead b{color:#444;font-weight:600}
      """;
}
