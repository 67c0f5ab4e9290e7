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
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Java suite generator, for the training and the held-out family: deterministic, on target
 * length, answers present and solvable, haystacks free of needle look-alikes, every phrasing and
 * haystack kind in use, and its documents have the format of the Python training generator's
 * (samples written by tools/train/suite.py --sample [--held-out] are solved by the same oracle).
 */
class SuiteGeneratorTest {

  static final SuiteText TEXT = SuiteText.load();
  static final SuiteText HELD_OUT = SuiteText.loadHeldOut();
  static final TaskPrompts PROMPTS = new TaskPrompts(TEXT);

  /** About 4 characters a token, like suite.py's default counter. */
  static SuiteGenerator generator() {
    return generator(TEXT);
  }

  static SuiteGenerator generator(SuiteText st) {
    return new SuiteGenerator(st, s -> Math.max(1, s.length() / 4));
  }

  static boolean finds(String regex, String text) {
    return Pattern.compile(regex).matcher(text).find();
  }

  @Test
  void sameSeedSameDocumentOtherSeedOtherDocument() {
    for (SuiteText st : List.of(TEXT, HELD_OUT)) {
      for (String kind : SuiteGenerator.KINDS) {
        SuiteItem a = generator(st).make(kind, 11, 1500, 0.3, 4);
        SuiteItem b = generator(st).make(kind, 11, 1500, 0.3, 4);
        SuiteItem c = generator(st).make(kind, 12, 1500, 0.3, 4);
        assertEquals(PROMPTS.userMessage(a), PROMPTS.userMessage(b), kind);
        assertEquals(a, b, kind);
        assertNotEquals(PROMPTS.userMessage(a), PROMPTS.userMessage(c), kind);
      }
    }
  }

  @Test
  void everyDocumentIsSolvableAndNearItsTargetLength() {
    for (SuiteText st : List.of(TEXT, HELD_OUT)) {
      SuiteOracle oracle = new SuiteOracle(st);
      for (String kind : SuiteGenerator.KINDS) {
        for (int target : new int[] {300, 2000, 16000}) {
          for (long seed = 0; seed < 3; seed++) {
            SuiteItem it = generator(st).make(kind, target + seed, target, 0.5, 4);
            String msg = PROMPTS.userMessage(it);
            String where = st.family() + " " + kind + " " + target + " seed " + seed;
            int tokens = msg.length() / 4;
            // the shortest documents move in coarse steps (a multi-document prompt adds whole documents)
            assertTrue(tokens <= target && tokens >= (target < 400 ? 0.8 : 0.85) * target, where + ": " + tokens);
            assertEquals(it.expected(), oracle.solve(kind, msg), where);
            assertEquals(1.0, Scoring.score(it, it.reference()), where + ": the reference scores 1");
            assertEquals(SuiteGenerator.taskOf(kind), it.task());
          }
        }
      }
    }
  }

  @Test
  void theNeedleSitsAtTheAskedDepth() {
    for (double depth : new double[] {0.05, 0.5, 0.95}) {
      SuiteItem it = generator().make("niah_single", 3, 4000, depth, 4);
      double at = (double) it.text().indexOf(it.expected().get(0)) / it.text().length();
      assertEquals(depth, at, 0.05, "needle position");
    }
  }

  @Test
  void haystacksHoldNoNeedleLookAlikesNorValuesKeysOrVariables() {
    List<Pattern> needles = new ArrayList<>(new SuiteOracle(TEXT).needlePatterns());
    needles.addAll(new SuiteOracle(HELD_OUT).needlePatterns());
    Pattern forbidden = Pattern.compile("\\d{7}|[A-Z]{5}|" + new SuiteOracle(TEXT).slotPattern("key") + "|\\{[a-z0-9_]+\\}");
    Random rng = new Random(1);
    for (SuiteText st : List.of(TEXT, HELD_OUT)) {
      for (SuiteText.HaystackKind kind : st.haystackKinds()) {
        for (int i = 0; i < 1500; i++) {
          String s = st.sentence(rng, kind);
          assertFalse(forbidden.matcher(s).find(), kind.name() + ": " + s);
          for (Pattern p : needles) assertFalse(p.matcher(s).find(), kind.name() + " looks like a needle: " + s);
        }
      }
    }
  }

  @Test
  void documentsDrawEveryHaystackKindNeedlePhrasingAndQuestion() {
    for (SuiteText st : List.of(TEXT, HELD_OUT)) {
      SuiteOracle oracle = new SuiteOracle(st);
      Set<String> hay = new HashSet<>(), kv = new HashSet<>(), questions = new HashSet<>();
      for (long seed = 0; seed < 300; seed++) {
        SuiteItem it = generator(st).make("niah_multikey", seed, 250, 0.5, 4);
        String firstLine = it.text().split("\n")[0];
        for (SuiteText.HaystackKind k : st.haystackKinds()) {
          for (String t : k.templates()) if (finds(oracle.regex(t, List.of(), Map.of()), firstLine)) hay.add(k.name());
        }
        for (String t : st.kvNeedles()) if (finds(oracle.regex(t, List.of(), Map.of()), it.text())) kv.add(t);
        for (String q : st.questions("single")) if (it.question().matches(oracle.regex(q, List.of(), Map.of()))) questions.add(q);
      }
      assertEquals(st.haystackKinds().stream().map(SuiteText.HaystackKind::name).collect(Collectors.toSet()), hay, st.family());
      assertEquals(Set.copyOf(st.kvNeedles()), kv, st.family());
      assertEquals(Set.copyOf(st.questions("single")), questions, st.family());
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
    for (SuiteText st : List.of(TEXT, HELD_OUT)) {
      String file = st.family().equals("train") ? "python-sample.jsonl" : "python-sample-heldout.jsonl";
      List<String> lines = Files.readAllLines(Path.of("src/test/resources/eval/" + file), StandardCharsets.UTF_8);
      assertEquals(SuiteGenerator.KINDS.size(), lines.size());
      for (String line : lines) {
        JsonNode o = json.readTree(line);
        assertEquals(st.family(), o.get("family").asText(), file);
        SuiteItem it = SuiteJsonl.fromJson(o, 1);
        String where = file + " " + it.kind();
        String javaMessage = PROMPTS.userMessage(it);
        assertEquals(o.get("user_message").asText(), javaMessage, where + ": Java builds Python's user message");
        assertEquals(it.expected(), new SuiteOracle(st).solve(it.kind(), javaMessage), where);
        assertEquals(1.0, Scoring.score(it, it.reference()), where);
        SuiteItem javaItem = generator(st).make(it.kind(), 100, 400, 0.5, it.expected().size());
        assertEquals(shape(it.reference()), shape(javaItem.reference()), where + ": same answer format");
      }
    }
  }

  /** The answer with digits, keys, variables, titles and facts blurred: what is left is the format. */
  static String shape(String s) {
    return s.replaceAll("\\d", "9").replaceAll("[A-Z]{5}", "VVVVV").replaceAll("[a-z]+-[a-z]+", "k-k")
        .replaceAll("(?m)^[A-Z][a-z]+ [a-z]+ (the|a) .+\\.$", "FACT.").replaceAll("^[A-Z][a-z]+ [a-z]+ [a-z]+: ", "T: ")
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
