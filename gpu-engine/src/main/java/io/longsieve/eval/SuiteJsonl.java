package io.longsieve.eval;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Suite items as JSON lines in the Spark job's input format (doc_id, task, text | documents,
 * question, reference) plus kind, expected, depth, length and prompt_tokens — so a written suite
 * is also job input, and any suite with expected answers can be read back and run. On reading,
 * kind defaults from task (qa -> niah_single, multi_doc_qa -> mdqa, summary -> summary) and
 * expected from reference (split on newlines for a summary).
 */
public final class SuiteJsonl {
  private static final ObjectMapper JSON = new ObjectMapper();

  private SuiteJsonl() {}

  public static void write(List<SuiteItem> items, Path file) {
    try {
      if (file.getParent() != null) Files.createDirectories(file.getParent());
      try (BufferedWriter w = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
        for (SuiteItem it : items) {
          w.write(JSON.writeValueAsString(toJson(it)));
          w.write('\n');
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public static ObjectNode toJson(SuiteItem it) {
    ObjectNode o = JSON.createObjectNode();
    o.put("doc_id", it.docId());
    o.put("task", it.task());
    if (it.text() != null) o.put("text", it.text());
    if (!it.documents().isEmpty()) {
      ArrayNode a = o.putArray("documents");
      for (SuiteItem.Document d : it.documents()) a.addObject().put("title", d.title()).put("text", d.text());
    }
    if (it.question() != null) o.put("question", it.question());
    o.put("reference", it.reference());
    o.put("kind", it.kind());
    ArrayNode e = o.putArray("expected");
    it.expected().forEach(e::add);
    o.put("depth", it.depth());
    o.put("length", it.length());
    o.put("prompt_tokens", it.promptTokens());
    return o;
  }

  public static List<SuiteItem> read(Path file) {
    List<SuiteItem> out = new ArrayList<>();
    try {
      int line = 0;
      for (String s : Files.readAllLines(file, StandardCharsets.UTF_8)) {
        line++;
        if (s.isBlank()) continue;
        try {
          out.add(fromJson(JSON.readTree(s), line));
        } catch (IOException | RuntimeException e) {
          throw new IllegalArgumentException(file + ":" + line + ": " + e.getMessage(), e);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out;
  }

  static SuiteItem fromJson(JsonNode o, int line) {
    String task = o.path("task").asText("");
    String kind = o.hasNonNull("kind") ? o.get("kind").asText()
        : task.equals("multi_doc_qa") ? "mdqa" : task.equals("summary") ? "summary" : "niah_single";
    if (!SuiteGenerator.taskOf(kind).equals(task)) {
      throw new IllegalArgumentException("kind '" + kind + "' does not belong to task '" + task + "'");
    }
    String reference = o.path("reference").asText(null);
    List<String> expected = new ArrayList<>();
    if (o.has("expected")) o.get("expected").forEach(n -> expected.add(n.asText()));
    else if (reference != null) {
      if (kind.equals("summary")) {
        for (String l : reference.split("\n")) if (!l.isBlank()) expected.add(l.trim());
      } else {
        expected.add(reference);
      }
    }
    if (expected.isEmpty()) throw new IllegalArgumentException("no expected answer (give 'expected' or 'reference')");
    List<SuiteItem.Document> docs = new ArrayList<>();
    o.path("documents").forEach(d -> docs.add(new SuiteItem.Document(d.path("title").asText(""), d.path("text").asText(""))));
    String docId = o.hasNonNull("doc_id") ? o.get("doc_id").asText() : "line-" + line;
    return new SuiteItem(docId, task, kind, o.path("text").asText(null), docs, o.path("question").asText(null),
        reference, expected, o.path("depth").asDouble(Double.NaN), o.path("length").asInt(0),
        o.path("prompt_tokens").asInt(0));
  }
}
