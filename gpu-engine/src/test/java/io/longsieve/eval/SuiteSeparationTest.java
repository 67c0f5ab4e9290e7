package io.longsieve.eval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The held-out family stays held out: its phrasings are not in the training text file, the
 * training code does not read its file, training-family documents never hold a held-out needle or
 * question, and held-out documents are built from the held-out file alone.
 */
class SuiteSeparationTest {

  static final SuiteText TRAIN = SuiteText.load();
  static final SuiteText HELD_OUT = SuiteText.loadHeldOut();
  static final Path TOOLS_TRAIN = Path.of("..", "tools", "train");
  static final Path RESOURCES = Path.of("src/main/resources/io/longsieve/eval");

  /** A template with its slots blurred: two templates with one skeleton are one phrasing. */
  static String skeleton(String t) {
    return t.replaceAll("\\{[a-z0-9_]+\\}", "{}").strip().toLowerCase();
  }

  /** Every phrasing a family owns: needles, questions, haystack templates. */
  static List<String> phrasings(SuiteText st) {
    List<String> out = new ArrayList<>(st.kvNeedles());
    st.vtStyles().forEach(v -> out.addAll(List.of(v.first(), v.next())));
    out.addAll(st.summaryMarkers());
    out.add(st.needle("fact"));
    out.add(st.needle("title"));
    for (String task : List.of("single", "multivalue", "multiquery", "vt", "mdqa")) out.addAll(st.questions(task));
    st.haystackKinds().forEach(k -> out.addAll(k.templates()));
    return out;
  }

  @Test
  void heldOutPhrasingsAreNotInTheTrainingTextFile() throws IOException {
    Set<String> train = phrasings(TRAIN).stream().map(SuiteSeparationTest::skeleton).collect(Collectors.toSet());
    Set<String> shared = new TreeSet<>();
    for (String t : phrasings(HELD_OUT)) if (train.contains(skeleton(t))) shared.add(t);
    assertEquals(Set.of(), shared, "held-out phrasings that training also has");
    String trainingFile = Files.readString(RESOURCES.resolve(SuiteText.TRAINING_FILE), StandardCharsets.UTF_8);
    for (String t : phrasings(HELD_OUT)) {
      String asJson = t.replace("\\", "\\\\").replace("\"", "\\\"");
      assertFalse(trainingFile.contains("\"" + asJson + "\""), "suite-text.json holds the held-out phrasing " + t);
    }
    Set<String> kinds = new TreeSet<>(HELD_OUT.haystackKinds().stream().map(SuiteText.HaystackKind::name).toList());
    kinds.retainAll(TRAIN.haystackKinds().stream().map(SuiteText.HaystackKind::name).toList());
    assertEquals(Set.of(), kinds, "haystack kinds in both families");
  }

  @Test
  void theTrainingCodeNeverNamesTheHeldOutFile() throws IOException {
    List<String> naming = new ArrayList<>();
    try (Stream<Path> files = Files.list(TOOLS_TRAIN)) {
      for (Path f : files.filter(p -> p.toString().endsWith(".py") || p.toString().endsWith(".sh")).toList()) {
        if (Files.readString(f, StandardCharsets.UTF_8).contains(SuiteText.HELD_OUT_FILE)) naming.add(f.getFileName().toString());
      }
    }
    // suite.py holds the name for its --held-out mode and the evaluation; train_needle.py asks suite.held_out_path()
    // only in its evaluation (suite.py --self-check checks that part with the AST of train_needle.py)
    assertEquals(List.of("suite.py"), naming);
    String trainer = Files.readString(TOOLS_TRAIN.resolve("train_needle.py"), StandardCharsets.UTF_8);
    String rowMaker = trainer.substring(trainer.indexOf("class RowMaker"), trainer.indexOf("def loss_fn"));
    String corpus = trainer.substring(trainer.indexOf("def tokenizer_corpus"), trainer.indexOf("def train_tokenizer"));
    for (String part : List.of(rowMaker, corpus)) assertFalse(part.toLowerCase().contains("held"), part.substring(0, 40));
  }

  @Test
  void trainingDocumentsNeverHoldAHeldOutNeedleOrQuestion() {
    SuiteOracle held = new SuiteOracle(HELD_OUT);
    List<Pattern> patterns = new ArrayList<>(held.needlePatterns());
    patterns.addAll(held.questionPatterns());
    SuiteGenerator gen = SuiteGeneratorTest.generator(TRAIN);
    for (int seed = 0; seed < 140; seed++) {
      String kind = SuiteGenerator.KINDS.get(seed % SuiteGenerator.KINDS.size());
      SuiteItem it = gen.make(kind, seed, 1200, 0.5, 4);
      String doc = SuiteGeneratorTest.PROMPTS.userMessage(it) + "\n" + it.reference();
      for (Pattern p : patterns) assertFalse(p.matcher(doc).find(), kind + " " + seed + " holds held-out " + p);
    }
  }

  @Test
  void heldOutDocumentsAreBuiltFromTheHeldOutFileAlone() {
    SuiteOracle held = new SuiteOracle(HELD_OUT);
    List<Pattern> trainNeedles = new SuiteOracle(TRAIN).needlePatterns();
    List<Pattern> trainQuestions = new SuiteOracle(TRAIN).questionPatterns();
    List<SuiteItem> suite = EvalSuite.generate(SuiteGeneratorTest.generator(HELD_OUT), SuiteGenerator.KINDS, 1024,
        List.of(1, 2), 2, 6);
    assertEquals(SuiteGenerator.KINDS.size() * 2 * 2, suite.size());
    for (SuiteItem it : suite) {
      String msg = SuiteGeneratorTest.PROMPTS.userMessage(it);
      assertTrue(it.docId().startsWith("heldout-"), it.docId());
      assertEquals(it.expected(), held.solve(it.kind(), msg), it.docId());
      for (Pattern p : trainNeedles) assertFalse(p.matcher(msg).find(), it.docId() + " holds a training needle " + p);
      if (it.question() != null) {
        for (Pattern p : trainQuestions) assertFalse(p.matcher(it.question()).find(), it.docId() + ": training question " + p);
      }
    }
  }
}
