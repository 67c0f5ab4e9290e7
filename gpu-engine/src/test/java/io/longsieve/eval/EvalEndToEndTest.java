package io.longsieve.eval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cli.EngineCli;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * A CI-sized eval through the engine on the tiny llama-gqa checkpoint (random weights, so the
 * scores are whatever they are): two tasks at 1x and 2x of a 384-token "training length", dense
 * and a 10% TokenSelect; every document runs under every policy and the outputs are written.
 */
class EvalEndToEndTest {

  static final Path MODEL = Path.of("src/test/resources/models/llama-gqa");

  static EvalOptions options(Path out, String... args) {
    EvalOptions o = new EvalOptions();
    new CommandLine(o).parseArgs(args);
    return o;
  }

  @Test
  void twoPoliciesOverASmallSuite(@TempDir Path out) throws Exception {
    EvalOptions o = options(out, "--model", MODEL.toString(), "--output", out.toString(), "--tasks", "niah_single,summary",
        "--lengths", "1,2", "--train-length", "384", "--per-cell", "1", "--policies", "ci", "--device", "cpu",
        "--threads", "2", "--run-id", "ci1", "--max-new-tokens", "12");
    ByteArrayOutputStream log = new ByteArrayOutputStream();
    EvalSession.Outcome r = EvalSession.run(o, new PrintStream(log, true, StandardCharsets.UTF_8));

    assertEquals(4, r.suite().size());
    assertEquals(8, r.docs().size(), "4 documents x 2 policies");
    assertEquals(8, r.rows().size(), "2 tasks x 2 lengths x 2 policies");
    for (EvalRow row : r.rows()) {
      assertEquals("ci1", row.runId());
      assertEquals(1, row.nDocs());
      assertEquals(0, row.nErrors(), row.toString());
      assertTrue(row.accuracy() >= 0 && row.accuracy() <= 1);
      assertTrue(row.length() == 384 || row.length() == 768);
    }
    for (DocResult d : r.docs()) {
      assertTrue(d.inputTokens() > 0.6 * d.item().length() && d.inputTokens() <= d.item().length(),
          d.item().docId() + " " + d.inputTokens());
      if (d.policy().equals("dense")) assertEquals(1.0, d.attendedFraction(), 1e-9);
      else assertTrue(d.attendedFraction() < 1.0, "TokenSelect skips (query, key) pairs in decode: " + d.attendedFraction());
    }
    for (EvalRow row : r.rows()) { // fidelity against dense attention beside accuracy, every cell measured
      assertEquals(1, row.nFidelity(), row.toString());
      if (row.policy().equals("dense")) {
        assertEquals(0.0, row.klMean());
        assertEquals(1.0, row.top1Agreement());
        assertEquals(1.0, row.attentionRecall(), 1e-9);
      } else {
        assertTrue(row.klMean() >= 0 && row.klMax() >= row.klMean() && row.top1Agreement() <= 1, row.toString());
        assertTrue(row.attentionRecall() > 0 && row.attentionRecall() <= 1 + 1e-9, row.toString());
      }
    }
    Path dir = out.resolve("eval");
    for (String line : Files.readAllLines(dir.resolve("docs.jsonl"))) {
      assertTrue(line.contains("\"kl_mean\":") && line.contains("\"attention_recall_by_layer\":[")
          && line.contains("\"first_divergence\":"), line);
    }
    assertTrue(Files.readString(dir.resolve("results.jsonl")).contains("\"top1_agreement\":1.0"));
    assertTrue(new String(log.toByteArray(), StandardCharsets.UTF_8).contains("attention recall at 4 prompt and 4 decode"));
    assertEquals(4, Files.readAllLines(dir.resolve("suite.jsonl")).size());
    assertEquals(8, Files.readAllLines(dir.resolve("docs.jsonl")).size());
    assertEquals(8, Files.readAllLines(dir.resolve("results.jsonl")).size());
    String md = Files.readString(dir.resolve("results.md"));
    assertTrue(md.contains("| niah_single @ 384 |") && md.contains("`tokenselect:k_frac=0.1,sinks=16,window=64`"), md);
    assertTrue(md.contains("**mean @ 768**"), md);
    assertTrue(md.contains("### Fidelity against dense attention on llama-gqa") && md.contains("| **0.0000 / 100.0 / 1.000**"), md);

    // the written suite runs again from JSONL (any suite with expected answers plugs in)
    EvalOptions again = options(out, "--model", MODEL.toString(), "--output", out.resolve("again").toString(),
        "--suite", dir.resolve("suite.jsonl").toString(), "--policy", "dense", "--device", "cpu", "--threads", "2",
        "--max-new-tokens", "12");
    EvalSession.Outcome r2 = EvalSession.run(again, new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8));
    assertEquals(r.docs().stream().filter(d -> d.policy().equals("dense")).map(DocResult::output).toList(),
        r2.docs().stream().map(DocResult::output).toList(), "same documents, same greedy outputs");
  }

  @Test
  void heldOutModeBuildsEveryTaskFromTheHeldOutFamily(@TempDir Path out) throws Exception {
    String[] common = {"--model", MODEL.toString(), "--lengths", "1", "--train-length", "384", "--per-cell", "1",
        "--policy", "dense", "--device", "cpu", "--threads", "2", "--max-new-tokens", "4", "--no-fidelity"};
    EvalOptions held = options(out, concat(common, "--output", out.resolve("held").toString(), "--held-out"));
    EvalSession.Outcome r = EvalSession.run(held, new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8));
    EvalSession.Outcome t = EvalSession.run(options(out, concat(common, "--output", out.resolve("train").toString())),
        new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8));

    assertEquals(SuiteGenerator.KINDS, r.suite().stream().map(SuiteItem::kind).toList(), "every task");
    SuiteOracle heldOracle = new SuiteOracle(SuiteText.loadHeldOut());
    List<java.util.regex.Pattern> trainNeedles = new SuiteOracle(SuiteText.load()).needlePatterns();
    TaskPrompts prompts = TaskPrompts.standard();
    for (int i = 0; i < r.suite().size(); i++) {
      SuiteItem h = r.suite().get(i);
      String msg = prompts.userMessage(h);
      assertTrue(h.docId().startsWith("heldout-"), h.docId());
      assertEquals(h.expected(), heldOracle.solve(h.kind(), msg), h.docId() + ": read with the held-out phrasings");
      assertTrue(trainNeedles.stream().noneMatch(p -> p.matcher(msg).find()), h.docId() + " holds a training needle");
      assertTrue(!t.suite().get(i).docId().startsWith("heldout-"), "without --held-out: the training family");
    }
    assertEquals(SuiteGenerator.KINDS.size(), r.docs().size());
    assertTrue(r.docs().stream().allMatch(d -> d.error() == null && d.inputTokens() > 0), "every held-out document ran");
    String md = Files.readString(out.resolve("held/eval/results.md"));
    assertTrue(md.contains("held-out family (suite-heldout.json)"), md.lines().findFirst().orElse(""));
    assertTrue(Files.readString(out.resolve("train/eval/results.md")).contains("training family (suite-text.json)"));
  }

  static String[] concat(String[] a, String... b) {
    String[] out = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  @Test
  void attentionRecallIsAskedOfTheCpuOnly(@TempDir Path out) {
    EvalOptions auto = options(out, "--model", MODEL.toString(), "--output", out.toString());
    assertEquals(4, EvalSession.recallPoints(auto, "cpu"));
    assertEquals(0, EvalSession.recallPoints(auto, "cuda"));
    EvalOptions asked = options(out, "--model", MODEL.toString(), "--output", out.toString(), "--recall-points", "2");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> EvalSession.recallPoints(asked, "cuda"));
    assertTrue(e.getMessage().startsWith("--recall-points 2: attention recall is measured on the CPU backend only"),
        e.getMessage());
  }

  @Test
  void aMisspeltPolicyFailsBeforeAnyDocumentRuns(@TempDir Path out) {
    EvalOptions o = options(out, "--model", MODEL.toString(), "--output", out.toString(), "--policies", "dense;tokenselekt");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> EvalSession.run(o, System.err));
    assertTrue(e.getMessage().contains("tokenselekt"), e.getMessage());
    assertTrue(!Files.exists(out.resolve("eval").resolve("suite.jsonl")));
  }

  @Test
  void engineCliHasTheEvalEngineCommand(@TempDir Path out) {
    int rc = EngineCli.commandLine().execute("eval-engine", "--model", MODEL.toString(), "--output", out.toString(),
        "--tasks", "niah_single", "--lengths", "1", "--train-length", "128", "--per-cell", "1", "--write-suite-only",
        "--device", "cpu");
    assertEquals(0, rc);
    assertTrue(Files.isRegularFile(out.resolve("eval/suite.jsonl")));
  }

  @Test
  void policyPresets() {
    assertEquals(EvalOptions.STANDARD_POLICIES, options(null, "--model", "m", "--output", "o", "--policies", "standard").policyList());
    assertEquals(List.of("dense", "tsa + selkv:ratio=0.25"),
        options(null, "--model", "m", "--output", "o", "--policy", "dense", "--policies", "tsa + selkv:ratio=0.25").policyList());
    EvalRunner.parse(EvalOptions.STANDARD_POLICIES);
  }
}
