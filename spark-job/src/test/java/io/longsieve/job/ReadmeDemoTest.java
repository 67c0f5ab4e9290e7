package io.longsieve.job;

import static org.apache.spark.sql.functions.col;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The README tells the truth about its demo: the demo command, taken from the README itself, runs as
 * written (the bundled model, the sample documents) and every statement the README makes about what it
 * produces is checked against that output: the files it writes, the documents it answers exactly per kind
 * (the README's table, read back here), the audited document and its agreement. A README edit that the
 * demo does not bear out fails here, and so does a model or document change the README does not follow.
 */
class ReadmeDemoTest {

  private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();
  private static SparkSession spark;

  @TempDir
  Path dir;

  @AfterAll
  static void stopSpark() {
    if (spark != null) spark.stop();
  }

  @Test
  void theDemoProducesWhatTheReadmeSays() throws Exception {
    String readme = Files.readString(ROOT.resolve("README.md"));
    Matcher command = Pattern.compile("\nbin/longsieve (run --input examples/docs.jsonl --output out/demo[^\n]*)\n")
        .matcher(readme);
    assertTrue(command.find(), "the README shows the demo command");
    Path out = dir.resolve("demo");
    List<String> args = new ArrayList<>();
    for (String a : command.group(1).split(" ")) {
      args.add(a.equals("out/demo") ? out.toString() : a.equals("examples/docs.jsonl") ? ROOT.resolve(a).toString() : a);
    }
    args.addAll(List.of("--run-id", "demo", "--master", "local[2]")); // as bin/longsieve on a 2-core machine
    String home = System.getProperty("longsieve.home");
    System.setProperty("longsieve.home", ROOT.toString()); // bin/longsieve's: the bundled model is the default
    spark = JobTestSupport.session();
    JobTestSupport.Cli r;
    try {
      r = JobTestSupport.cli(args.toArray(String[]::new));
    } finally {
      if (home == null) System.clearProperty("longsieve.home");
      else System.setProperty("longsieve.home", home);
    }
    assertEquals(0, r.code(), r.err());

    // "The demo writes ..."
    for (String written : List.of("outputs/run_id=demo", "stats/run_id=demo", "audit/run_id=demo", "runs/demo.json",
        "report/demo.html")) {
      assertTrue(Files.exists(out.resolve(written)), written + " is written");
    }

    // the table of exact answers per kind of document
    Map<String, int[]> actual = new TreeMap<>(); // kind -> {exact, documents}
    for (Row row : spark.read().parquet(out.resolve("outputs").toString()).where(col("run_id").equalTo("demo"))
        .select("doc_id", "status", "output", "reference").collectAsList()) {
      String kind = row.getString(0).replaceFirst("-\\d+$", "");
      boolean exact = "ok".equals(row.getString(1)) && row.getString(3) != null
          && AnswerAgreement.normalised(row.getString(2)).equals(AnswerAgreement.normalised(row.getString(3)));
      int[] n = actual.computeIfAbsent(kind, k -> new int[2]);
      if (exact) n[0]++;
      n[1]++;
    }
    Map<String, int[]> claimed = new TreeMap<>();
    Matcher row = Pattern.compile("\n\\| `([a-z_]+)-\\*` \\|[^|\n]*\\| (\\d+) of (\\d+) \\|").matcher(readme);
    while (row.find()) claimed.put(row.group(1), new int[] {Integer.parseInt(row.group(2)), Integer.parseInt(row.group(3))});
    assertEquals(table(actual), table(claimed), "the README's table of exact answers is the demo's");

    // the audit: the one document its fraction samples, in agreement with itself (dense against dense)
    Matcher audited = Pattern.compile("audits one of the 20 documents, `([a-z0-9_-]+)`").matcher(readme);
    assertTrue(audited.find(), "the README names the audited document");
    List<Row> audit = spark.read().parquet(out.resolve("audit").toString()).where(col("run_id").equalTo("demo"))
        .select("doc_id", "exact_match").collectAsList();
    assertEquals(List.of(audited.group(1)), audit.stream().map(a -> a.getString(0)).toList());
    JsonNode manifest = new ObjectMapper().readTree(out.resolve("runs").resolve("demo.json").toFile());
    assertTrue(readme.contains("agreement 1.000 in the manifest (`audit.agreement_token_f1`), 100.0% in the\nreport's"),
        "the README says what the audit agrees");
    assertEquals(1.0, manifest.get("audit").get("agreement_token_f1").asDouble(), 0.0);
    String report = Files.readString(out.resolve("report").resolve("demo.html"));
    String section = report.substring(report.indexOf("<section id=\"audit\">"));
    assertTrue(section.substring(0, section.indexOf("</section>")).contains(">100.0%<"), "the report's audit section");
    assertEquals(20, manifest.get("rows").asInt());
  }

  /** The table as the README writes it, so a mismatch shows the lines to paste. */
  private static String table(Map<String, int[]> rows) {
    StringBuilder sb = new StringBuilder();
    rows.forEach((kind, n) -> sb.append("| `").append(kind).append("-*` | ").append(n[0]).append(" of ").append(n[1])
        .append(" |\n"));
    return sb.toString();
  }
}
