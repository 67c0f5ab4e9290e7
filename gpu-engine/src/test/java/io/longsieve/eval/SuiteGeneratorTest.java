package io.longsieve.eval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Java suite generator: deterministic, on target length, answers present and solvable, and
 * its documents have the format of the Python training generator's (a sample written by
 * tools/train/suite.py --sample is solved by the same oracle).
 */
class SuiteGeneratorTest {

  static final SuiteText TEXT = SuiteText.load();
  static final TaskPrompts PROMPTS = new TaskPrompts(TEXT);

  /** About 4 characters a token, like suite.py's default counter. */
  static SuiteGenerator generator() {
    return new SuiteGenerator(TEXT, s -> Math.max(1, s.length() / 4));
  }

  @Test
  void sameSeedSameDocumentOtherSeedOtherDocument() {
    for (String kind : SuiteGenerator.KINDS) {
      SuiteItem a = generator().make(kind, 11, 1500, 0.3, 4);
      SuiteItem b = generator().make(kind, 11, 1500, 0.3, 4);
      SuiteItem c = generator().make(kind, 12, 1500, 0.3, 4);
      assertEquals(PROMPTS.userMessage(a), PROMPTS.userMessage(b), kind);
      assertEquals(a, b, kind);
      assertNotEquals(PROMPTS.userMessage(a), PROMPTS.userMessage(c), kind);
    }
  }

  @Test
  void everyDocumentIsSolvableAndNearItsTargetLength() {
    for (String kind : SuiteGenerator.KINDS) {
      for (int target : new int[] {300, 2000, 16000}) {
        SuiteItem it = generator().make(kind, target, target, 0.5, 4);
        String msg = PROMPTS.userMessage(it);
        int tokens = msg.length() / 4;
        assertTrue(tokens <= target && tokens >= 0.85 * target, kind + " " + target + ": " + tokens);
        assertEquals(it.expected(), SuiteOracle.solve(kind, msg), kind + " " + target);
        assertEquals(1.0, Scoring.score(it, it.reference()), kind + ": the reference scores 1");
        assertEquals(SuiteGenerator.taskOf(kind), it.task());
      }
    }
  }

  @Test
  void theNeedleSitsAtTheAskedDepth() {
    for (double depth : new double[] {0.05, 0.5, 0.95}) {
      SuiteItem it = generator().make("niah_single", 3, 4000, depth, 4);
      String needle = "The special magic number for";
      double at = (double) it.text().indexOf(needle) / it.text().length();
      assertEquals(depth, at, 0.05, "needle position");
    }
  }

  @Test
  void haystackNeverContainsNeedleMarkers() {
    Random rng = new Random(1);
    for (int i = 0; i < 5000; i++) {
      String s = TEXT.sentence(rng);
      for (String m : SuiteText.MARKERS) assertFalse(s.contains(m), s);
      assertFalse(s.contains("{"), s);
    }
  }

  @Test
  void suitePlanCoversEveryTaskLengthAndDepth() {
    List<SuiteItem> suite = EvalSuite.generate(generator(), SuiteGenerator.KINDS, 512, List.of(1, 2), 3, 5);
    assertEquals(SuiteGenerator.KINDS.size() * 2 * 3, suite.size());
    assertEquals(suite, EvalSuite.generate(generator(), SuiteGenerator.KINDS, 512, List.of(1, 2), 3, 5), "deterministic");
    for (SuiteItem it : suite) {
      assertTrue(it.length() == 512 || it.length() == 1024);
      assertTrue(it.promptTokens() <= it.length() - EvalSuite.answerBudget(it.kind()), it.docId());
    }
    assertEquals(List.of(1.0 / 6, 0.5, 5.0 / 6), suite.stream().filter(i -> i.kind().equals("niah_single") && i.length() == 512)
        .map(SuiteItem::depth).toList());
  }

  @Test
  void pythonGeneratedDocumentsParseLikeJavaOnes() throws Exception {
    ObjectMapper json = new ObjectMapper();
    List<String> lines = Files.readAllLines(Path.of("src/test/resources/eval/python-sample.jsonl"), StandardCharsets.UTF_8);
    assertEquals(SuiteGenerator.KINDS.size(), lines.size());
    for (String line : lines) {
      JsonNode o = json.readTree(line);
      SuiteItem it = SuiteJsonl.fromJson(o, 1);
      String javaMessage = PROMPTS.userMessage(it);
      assertEquals(o.get("user_message").asText(), javaMessage, it.kind() + ": Java builds Python's user message");
      assertEquals(it.expected(), SuiteOracle.solve(it.kind(), javaMessage), it.kind());
      assertEquals(1.0, Scoring.score(it, it.reference()), it.kind());
      SuiteItem javaItem = generator().make(it.kind(), 100, 400, 0.5, it.expected().size());
      assertEquals(shape(it.reference()), shape(javaItem.reference()), it.kind() + ": same answer format");
    }
  }

  /** The answer with digits, key words and names blurred: what is left is the format. */
  static String shape(String s) {
    return s.replaceAll("\\d", "9").replaceAll("[A-Z]{5}", "VVVVV").replaceAll("[a-z]+-[a-z]+", "k-k")
        .replaceAll("of the .+? report", "of the T report").replaceAll("(?m)^.+ in .+\\.$", "FACT.")
        .replaceAll("(, 9999999)+", ", 9999999");
  }

  @Test
  void writtenSuiteReadsBack(@TempDir Path dir) {
    List<SuiteItem> suite = EvalSuite.generate(generator(), List.of("niah_single", "mdqa", "summary"), 256, List.of(1), 2, 9);
    Path f = dir.resolve("suite.jsonl");
    SuiteJsonl.write(suite, f);
    assertEquals(suite, SuiteJsonl.read(f));
  }
}
