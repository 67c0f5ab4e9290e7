package io.longsieve.eval;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

class ScoringTest {

  @Test
  void singleAnswersNeedAnExactMatchOfTheSentenceOrTheValue() {
    String ref = "amber-falcon: 1234567";  // the suite's answer format: the key as asked, the value from the document
    List<String> exp = List.of("1234567");
    assertEquals(1.0, Scoring.score("niah_single", exp, ref, ref));
    assertEquals(1.0, Scoring.score("niah_single", exp, "  Amber-falcon:   1234567. ", ref));
    assertEquals(1.0, Scoring.score("niah_single", exp, "1234567.", ref));
    assertEquals(0.0, Scoring.score("niah_single", exp, "amber-otter: 1234567", ref), "the right number for the wrong key is wrong");
    assertEquals(0.0, Scoring.score("niah_single", exp, "amber-falcon: 1234568", ref));
    String sentence = "The special magic number for amber-falcon is 1234567.";  // a sentence reference (run-2 suites)
    assertEquals(1.0, Scoring.score("niah_single", exp, "  the special magic number for amber-falcon is 1234567 ", sentence));
    assertEquals(0.0, Scoring.score("niah_single", exp, ref + " And more.", ref), "extra text is not an exact match");
    assertEquals(0.0, Scoring.score("mdqa", exp, "", ref));
  }

  @Test
  void listsScoreTheFractionOfItemsFound() {
    List<String> exp = List.of("1111111", "2222222", "3333333", "4444444");
    assertEquals(1.0, Scoring.score("niah_multivalue", exp, "4444444, 3333333, 2222222, 1111111", null), "order is free");
    assertEquals(0.5, Scoring.score("niah_multivalue", exp, "1111111 and 3333333", null));
    assertEquals(0.4, Scoring.score("vt", List.of("ABCDE", "FGHIJ", "KLMNO", "PQRST", "UVWXY"), "abcde, klmno", null), 1e-12,
        "case-insensitive");
  }

  @Test
  void summaryCountsFactsInOrder() {
    List<String> facts = List.of("Alice found the old bridge in Paris.", "Bruno sold the red tower in Oslo.",
        "Carla fixed the blue clinic in Lima.");
    assertEquals(1.0, Scoring.score("summary", facts, String.join("\n", facts), null));
    assertEquals(2.0 / 3, Scoring.score("summary", facts, facts.get(0) + "\n" + facts.get(2), null), 1e-12);
    assertEquals(1.0 / 3, Scoring.score("summary", facts, facts.get(2) + "\n" + facts.get(0), null), 1e-12,
        "a fact before the previous one found does not count");
    assertEquals(1.0, Scoring.score("summary", facts, "alice found   the old bridge in paris. bruno sold the red tower in "
        + "oslo.\ncarla fixed the blue clinic in lima.", null), "case and spacing are free");
  }
}
