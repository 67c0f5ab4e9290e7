package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.policy.PolicySpec;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;

/**
 * The generation stage, one document at a time with the real tiny model (no Spark needed): each
 * outcome becomes the right status, and nothing throws.
 */
class DocumentProcessorTest {

  /** Small context so a few hundred words are over it; one thread, the tests run beside others. */
  private static final EngineSpec SPEC = EngineSpec.of(JobTestSupport.MODEL).withDevice("cpu").withThreads(1)
      .withMaxContext(96);

  private static Row parsed(String json) {
    return DocumentParser.parse(json, true, "docs.jsonl", "file:/docs.jsonl", 1).get(0);
  }

  private static Row run(DocumentProcessor p, String json) {
    return p.process(parsed(json), "driver", 0);
  }

  private static String longText(int words) {
    return String.join(" ", JobTestSupport.words(words)) + ".";
  }

  @Test
  void aShortDocumentIsOkWithOutputAndStats() {
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, PolicySpec.DENSE, false);
    Row r = run(p, JobTestSupport.json("d1", "qa", "The bridge opened in May.", "When did the bridge open?"));
    assertEquals(JobSchemas.OK, r.getAs("status"));
    assertNull(r.getAs("error"));
    assertNotNull(r.getAs("output"));
    assertTrue((int) r.getAs("output_tokens") >= 1 && (int) r.getAs("output_tokens") <= 4);
    assertTrue((int) r.getAs("input_tokens") > 10);
    assertEquals("cpu", r.getAs("backend"));
    assertEquals("dense", r.getAs("policy"));
    assertEquals("dense", r.getAs("policy_resolved"));
    assertNotNull(r.getAs("finish_reason"));
    assertNotNull(r.getList(r.fieldIndex("selected_fraction_by_layer")), "the engine's stats come along");
  }

  @Test
  void aPromptOverTheContextIsTooLong() {
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, PolicySpec.DENSE, false);
    Row r = run(p, JobTestSupport.json("d1", "summary", longText(300), null));
    assertEquals(JobSchemas.TOO_LONG, r.getAs("status"));
    String error = r.getAs("error");
    assertTrue(error.matches("prompt has \\d+ tokens; the context limit is 96 \\(run with --truncate .*"), error);
    assertTrue((int) r.getAs("input_tokens") >= 96);
    assertNull(r.getAs("output"));
  }

  @Test
  void truncateKeepsHeadAndTailAndSaysSoInNotes() {
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, PolicySpec.DENSE, true);
    Row r = run(p, JobTestSupport.json("d1", "qa", longText(300), "What is this about?"));
    assertEquals(JobSchemas.OK, r.getAs("status"));
    String notes = r.getAs("notes");
    assertTrue(notes.matches("truncated by --truncate: kept the first \\d+ and the last \\d+ of \\d+ document tokens"
        + " \\(\\d+ omitted\\)"), notes);
    assertTrue((int) r.getAs("input_tokens") <= 96 - 4, "room left for the answer");
  }

  @Test
  void truncateCannotHelpWhenTheQuestionAloneIsTooLong() {
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, PolicySpec.DENSE, true);
    Row r = run(p, JobTestSupport.json("d1", "qa", "Short text.", longText(200) + "?"));
    assertEquals(JobSchemas.TOO_LONG, r.getAs("status"));
    assertTrue(((String) r.getAs("error")).contains("the instruction and question alone do not fit"));
  }

  @Test
  void anExceptionWhileGeneratingIsAnEngineErrorRow() {
    // a TSA layer the model does not have fails inside generate (the driver's ModelCheck would refuse
    // it before Spark starts), for this document only
    PolicySpec tooDeep = PolicySpec.parse("tsa:layers=99");
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, tooDeep, false);
    Row r = run(p, JobTestSupport.json("d1", "summary", "A short text.", null));
    assertEquals(JobSchemas.ENGINE_ERROR, r.getAs("status"));
    assertTrue(((String) r.getAs("error")).startsWith("IllegalArgumentException: tsa: layer 99"),
        (String) r.getAs("error"));
    assertEquals(tooDeep.canonical(), r.getAs("policy"), "error rows carry the canonical policy too");
    assertNull(r.getAs("policy_resolved"));
  }

  @Test
  void aRowThatArrivesBadPassesThroughWithoutTheEngine() {
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, PolicySpec.DENSE, false);
    Row r = run(p, "{not json");
    assertEquals(JobSchemas.BAD_INPUT, r.getAs("status"));
    assertEquals("docs.jsonl:1", r.getAs("doc_id"));
    assertNull(r.getAs("backend"));
    assertEquals("r1", r.getAs("run_id"));
  }
}
