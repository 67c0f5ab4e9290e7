package io.longsieve.eval;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.longsieve.engine.Fidelity;
import io.longsieve.engine.spi.AttentionRecall;
import io.longsieve.policy.PolicyStats;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Writes eval results as text: a Markdown table (accuracy per task x length, one column per
 * policy, then the mean over tasks per length, the mean attended fraction and ms per document),
 * the fidelity table beside it (KL, top-1 agreement and attention recall against dense attention),
 * and JSON lines of the aggregated rows and of every document's output.
 */
public final class EvalReport {
  private static final ObjectMapper JSON = new ObjectMapper();

  private EvalReport() {}

  public static String markdown(List<EvalRow> rows, String title) {
    Set<String> policies = new LinkedHashSet<>();
    Map<String, Map<String, EvalRow>> byCell = new LinkedHashMap<>();  // "kind @ length" -> policy -> row
    Map<Integer, Map<String, List<EvalRow>>> byLength = new LinkedHashMap<>();
    for (EvalRow r : rows) {
      policies.add(r.policy());
      byCell.computeIfAbsent(r.task() + " @ " + r.length(), k -> new LinkedHashMap<>()).put(r.policy(), r);
      byLength.computeIfAbsent(r.length(), k -> new LinkedHashMap<>()).computeIfAbsent(r.policy(), k -> new ArrayList<>()).add(r);
    }
    StringBuilder b = new StringBuilder();
    b.append("### ").append(title).append("\n\n");
    header(b, "task @ length", policies);
    for (Map.Entry<String, Map<String, EvalRow>> e : byCell.entrySet()) {
      b.append("| ").append(e.getKey());
      for (String p : policies) {
        EvalRow r = e.getValue().get(p);
        b.append(" | ").append(r == null ? "" : pct(r.accuracy()) + (r.nErrors() > 0 ? " (" + r.nErrors() + " err)" : ""));
      }
      b.append(" |\n");
    }
    for (Map.Entry<Integer, Map<String, List<EvalRow>>> e : byLength.entrySet()) {
      b.append("| **mean @ ").append(e.getKey()).append("**");
      for (String p : policies) {
        List<EvalRow> l = e.getValue().get(p);
        b.append(" | ").append(l == null ? "" : "**" + pct(l.stream().mapToDouble(EvalRow::accuracy).average().orElse(Double.NaN)) + "**");
      }
      b.append(" |\n");
    }
    b.append("\nMean attended fraction / ms per document:\n\n");
    header(b, "length", policies);
    for (Map.Entry<Integer, Map<String, List<EvalRow>>> e : byLength.entrySet()) {
      b.append("| ").append(e.getKey());
      for (String p : policies) {
        List<EvalRow> l = e.getValue().get(p);
        if (l == null) {
          b.append(" | ");
          continue;
        }
        double att = l.stream().mapToDouble(EvalRow::attendedFraction).filter(d -> !Double.isNaN(d)).average().orElse(Double.NaN);
        double ms = l.stream().mapToDouble(EvalRow::msPerDoc).average().orElse(Double.NaN);
        b.append(" | ").append(String.format(Locale.ROOT, "%.2f / %.0f ms", att, ms));
      }
      b.append(" |\n");
    }
    return b.toString();
  }

  /**
   * The fidelity table beside the accuracy table: per task x length and per length (mean over tasks), one
   * column per policy, each cell {@code mean KL / top-1 agreement % / attention recall}; "" when no row has a
   * fidelity measurement.
   */
  public static String fidelityMarkdown(List<EvalRow> rows, String title) {
    if (rows.stream().noneMatch(r -> r.nFidelity() > 0)) return "";
    Set<String> policies = new LinkedHashSet<>();
    Map<String, Map<String, List<EvalRow>>> byCell = new LinkedHashMap<>();  // "kind @ length" -> policy -> rows
    Map<Integer, Map<String, List<EvalRow>>> byLength = new LinkedHashMap<>();
    for (EvalRow r : rows) {
      policies.add(r.policy());
      byCell.computeIfAbsent(r.task() + " @ " + r.length(), k -> new LinkedHashMap<>())
          .computeIfAbsent(r.policy(), k -> new ArrayList<>()).add(r);
      byLength.computeIfAbsent(r.length(), k -> new LinkedHashMap<>()).computeIfAbsent(r.policy(), k -> new ArrayList<>()).add(r);
    }
    StringBuilder b = new StringBuilder();
    b.append("\n### ").append(title).append("\n\n")
        .append("Each cell: mean KL(dense ‖ policy) per token in nats / top-1 agreement (%) / attention recall (mean")
        .append(" over layers, heads and probed positions; n/a where not measured), along dense attention's own greedy")
        .append(" continuation (teacher forcing; docs/fidelity.md).\n\n");
    header(b, "task @ length", policies);
    for (Map.Entry<String, Map<String, List<EvalRow>>> e : byCell.entrySet()) {
      b.append("| ").append(e.getKey());
      for (String p : policies) b.append(" | ").append(fidelityCell(e.getValue().get(p)));
      b.append(" |\n");
    }
    for (Map.Entry<Integer, Map<String, List<EvalRow>>> e : byLength.entrySet()) {
      b.append("| **mean @ ").append(e.getKey()).append("**");
      for (String p : policies) b.append(" | **").append(fidelityCell(e.getValue().get(p))).append("**");
      b.append(" |\n");
    }
    return b.toString();
  }

  /** Mean KL / top-1 % / recall over rows (each a task's mean), weighted by the documents each measured. */
  static String fidelityCell(List<EvalRow> rows) {
    if (rows == null) return "";
    double kl = 0, top1 = 0, recall = 0;
    int n = 0, nRecall = 0;
    for (EvalRow r : rows) {
      if (r.nFidelity() == 0) continue;
      kl += r.klMean() * r.nFidelity();
      top1 += r.top1Agreement() * r.nFidelity();
      n += r.nFidelity();
      if (!Double.isNaN(r.attentionRecall())) {
        recall += r.attentionRecall() * r.nFidelity();
        nRecall += r.nFidelity();
      }
    }
    if (n == 0) return "n/a";
    return String.format(Locale.ROOT, "%.4f / %s / %s", kl / n, pct(top1 / n),
        nRecall == 0 ? "n/a" : String.format(Locale.ROOT, "%.3f", recall / nRecall));
  }

  private static void header(StringBuilder b, String first, Set<String> policies) {
    b.append("| ").append(first);
    for (String p : policies) b.append(" | `").append(p).append('`');
    b.append(" |\n|---");
    for (int i = 0; i < policies.size(); i++) b.append("|---:");
    b.append("|\n");
  }

  static String pct(double v) {
    return Double.isNaN(v) ? "n/a" : String.format(Locale.ROOT, "%.1f", 100 * v);
  }

  public static void writeRows(List<EvalRow> rows, Path file) {
    write(file, rows.stream().map(r -> {
      ObjectNode o = JSON.createObjectNode();
      o.put("run_id", r.runId()).put("task", r.task()).put("length", r.length()).put("policy", r.policy())
          .put("accuracy", r.accuracy()).put("attended_fraction", r.attendedFraction()).put("ms_per_doc", r.msPerDoc())
          .put("n_docs", r.nDocs()).put("n_errors", r.nErrors());
      if (r.nFidelity() > 0) {
        o.put("kl_mean", r.klMean()).put("kl_max", r.klMax()).put("top1_agreement", r.top1Agreement())
            .put("n_fidelity", r.nFidelity());
        if (!Double.isNaN(r.attentionRecall())) o.put("attention_recall", r.attentionRecall());
      }
      return o;
    }).toList());
  }

  public static void writeDocs(List<DocResult> docs, Path file) {
    write(file, docs.stream().map(d -> {
      ObjectNode o = JSON.createObjectNode();
      o.put("doc_id", d.item().docId()).put("kind", d.item().kind()).put("length", d.item().length())
          .put("depth", d.item().depth()).put("policy", d.policy()).put("score", d.score()).put("output", d.output())
          .put("reference", d.item().reference()).put("attended_fraction", d.attendedFraction()).put("ms", d.ms())
          .put("input_tokens", d.inputTokens());
      if (d.error() != null) o.put("error", d.error());
      Fidelity fid = d.fidelity();
      if (fid != null) {
        o.put("kl_mean", fid.klMean()).put("kl_max", fid.klMax()).put("top1_agreement", fid.top1Agreement())
            .put("fidelity_steps", fid.steps());
        if (fid.firstDivergence() >= 0) o.put("first_divergence", fid.firstDivergence());
        else o.putNull("first_divergence");
        AttentionRecall a = fid.recall();
        if (a != null) {
          o.put("attention_recall", a.mean()).put("attention_recall_prefill", a.prefill())
              .put("attention_recall_decode", a.decode());
          ArrayNode l = o.putArray("attention_recall_by_layer");
          for (double v : a.byLayer()) l.add(v);
        }
      }
      if (d.stats() != null) {
        PolicyStats s = d.stats();
        o.put("cache_hit_rate", s.selectionCacheHitRate()).put("kv_bytes_after", s.kvBytesAfter())
            .put("sparse_layers", s.sparseLayers()).put("selection_ms", s.selectionMs());
        ArrayNode a = o.putArray("fraction_by_layer");
        for (float f : s.selectedFractionByLayer()) a.add(f);
      }
      return o;
    }).toList());
  }

  private static void write(Path file, List<ObjectNode> nodes) {
    try {
      if (file.getParent() != null) Files.createDirectories(file.getParent());
      try (BufferedWriter w = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
        for (ObjectNode n : nodes) {
          w.write(JSON.writeValueAsString(n));
          w.write('\n');
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
