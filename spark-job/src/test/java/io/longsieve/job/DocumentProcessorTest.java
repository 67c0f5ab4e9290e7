package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.engine.Engine;
import io.longsieve.engine.GenerationRequest;
import io.longsieve.engine.GenerationResult;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.LoadedModel;
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

  // ---- prompts and sampling ----

  @Test
  void theSettingsUsedAreInTheStatsRowTheRowsOverTheRuns() {
    GenerationOptions run = new GenerationOptions(null, null, false, 0.7, 0.95, 11, java.util.List.of("END"));
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, PolicySpec.DENSE, false, run);
    Row fromRun = run(p, JobTestSupport.json("d1", "summary", "The bridge opened in May.", null));
    assertEquals(JobSchemas.OK, fromRun.getAs("status"), fromRun.<String>getAs("error"));
    assertEquals("preset:summary", fromRun.getAs("prompt_source"));
    assertEquals(4, (int) fromRun.getAs("max_new_tokens"));
    assertEquals(0.7, fromRun.<Double>getAs("temperature"));
    assertEquals(0.95, fromRun.<Double>getAs("top_p"));
    assertEquals(11L, fromRun.<Long>getAs("seed"));
    assertEquals(java.util.List.of("END"), fromRun.getList(fromRun.fieldIndex("stop")));
    Row own = run(p, "{\"doc_id\":\"d2\",\"prompt\":\"Say {word}\",\"word\":\"river\",\"max_new_tokens\":2,"
        + "\"temperature\":0,\"seed\":5,\"stop\":[]}");
    assertEquals(JobSchemas.OK, own.getAs("status"), own.<String>getAs("error"));
    assertEquals("row", own.getAs("prompt_source"));
    assertEquals(2, (int) own.getAs("max_new_tokens"));
    assertTrue((int) own.getAs("output_tokens") <= 2, "the row's max_new_tokens is what ran");
    assertEquals(0.0, own.<Double>getAs("temperature"));
    assertEquals(0.95, own.<Double>getAs("top_p"), "the run's value where the row gives none");
    assertEquals(5L, own.<Long>getAs("seed"));
    assertEquals(java.util.List.of(), own.getList(own.fieldIndex("stop")));
  }

  @Test
  void theSameSeedGivesTheSameSampledOutputAndAnotherSeedMayNot() {
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 12, PolicySpec.DENSE, false);
    String row = "{\"doc_id\":\"s\",\"prompt\":\"{text}\",\"text\":\"river harbour council\",\"raw\":true,"
        + "\"temperature\":1.5,\"seed\":%d}";
    Row a = run(p, String.format(row, 7));
    Row b = run(p, String.format(row, 7));
    assertEquals(JobSchemas.OK, a.getAs("status"), a.<String>getAs("error"));
    assertEquals((String) a.getAs("output"), b.getAs("output"), "seeded sampling is reproducible");
    java.util.Set<String> outputs = new java.util.HashSet<>();
    for (int seed = 0; seed < 6; seed++) outputs.add(run(p, String.format(row, seed)).getAs("output"));
    assertTrue(outputs.size() > 1, "the seed reaches the sampler: " + outputs);
  }

  @Test
  void placeholdersInsideADocumentAreNotExpanded() {
    // raw, so the prompt is exactly the filled template: a document holding {question} must count its
    // own characters, not the (long) question's
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 1, PolicySpec.DENSE, false);
    String question = String.join(" ", JobTestSupport.words(40));
    Row injected = run(p, "{\"doc_id\":\"i\",\"prompt\":\"{text}\",\"raw\":true,\"text\":\"see {question} here\","
        + "\"question\":\"" + question + "\"}");
    Row literal = run(p, "{\"doc_id\":\"l\",\"prompt\":\"see {{question}} here\",\"raw\":true}");
    assertEquals(JobSchemas.OK, injected.getAs("status"), injected.<String>getAs("error"));
    assertEquals((int) literal.getAs("input_tokens"), (int) injected.getAs("input_tokens"));
  }

  @Test
  void aRowWhoseTemplateLacksAColumnNeverReachesTheEngine() {
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, PolicySpec.DENSE, false);
    Row r = run(p, "{\"doc_id\":\"m\",\"prompt\":\"{text} in {lang}\",\"text\":\"x\"}");
    assertEquals(JobSchemas.BAD_INPUT, r.getAs("status"));
    assertNull(r.getAs("backend"));
    assertNull(r.getAs("temperature"), "no settings were used");
  }

  @Test
  void aOneTurnConversationIsTheSamePromptAsTheSameUserMessage() {
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, PolicySpec.DENSE, false);
    Row asPrompt = run(p, "{\"doc_id\":\"a\",\"prompt\":\"Where is the river?\"}");
    Row asMessages = run(p, "{\"doc_id\":\"b\",\"messages\":[{\"role\":\"user\",\"content\":\"Where is the river?\"}]}");
    assertEquals(JobSchemas.OK, asMessages.getAs("status"), asMessages.<String>getAs("error"));
    assertEquals("messages", asMessages.getAs("prompt_source"));
    assertEquals((int) asPrompt.getAs("input_tokens"), (int) asMessages.getAs("input_tokens"));
    assertEquals(asPrompt.<String>getAs("output"), asMessages.getAs("output"));
  }

  @Test
  void laterTurnsAndTheRunsSystemMessageAreInTheConversation() {
    GenerationOptions withSystem = new GenerationOptions(null, "Answer in one word.", false, 0, 1, 0, null);
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 2, PolicySpec.DENSE, false, withSystem);
    String one = "{\"doc_id\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}";
    String three = "{\"doc_id\":\"b\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},"
        + "{\"role\":\"assistant\",\"content\":\"Hello there\"},{\"role\":\"user\",\"content\":\"Hi\"}]}";
    int plain = run(new DocumentProcessor(SPEC, "r1", 2, PolicySpec.DENSE, false), one).getAs("input_tokens");
    int system = run(p, one).getAs("input_tokens");
    int longer = run(p, three).getAs("input_tokens");
    assertTrue(system > plain, "the run's system message is a turn: " + system + " vs " + plain);
    assertTrue(longer > system, "every turn is rendered: " + longer + " vs " + system);
  }

  /**
   * The executor's engine, counting the calls that tokenize a prompt: any of its calls on a request that
   * holds no prompt ids (a request with ids runs them as they are).
   */
  private static final class CountingEngine implements Engine {
    final Engine engine = ExecutorEngine.get(SPEC);
    int tokenizations;
    GenerationRequest generated;

    private GenerationRequest count(GenerationRequest r) {
      if (r.promptIds() == null) tokenizations++;
      return r;
    }

    @Override public LoadedModel model() {
      return engine.model();
    }

    @Override public String backend() {
      return engine.backend();
    }

    @Override public String device() {
      return engine.device();
    }

    @Override public int maxContext() {
      return engine.maxContext();
    }

    @Override public int[] promptTokens(GenerationRequest r) {
      return engine.promptTokens(count(r));
    }

    @Override public GenerationRequest prepare(GenerationRequest r) {
      return engine.prepare(count(r));
    }

    @Override public GenerationResult generate(GenerationRequest r) {
      generated = r;
      return engine.generate(count(r));
    }

    @Override public void close() {
      // the executor's engine, shared with the other tests
    }
  }

  @Test
  void aDocumentIsTokenizedOnceAndItsIdsAreWhatTheEngineRuns() {
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, PolicySpec.DENSE, false);
    CountingEngine e = new CountingEngine();
    Row r = p.process(parsed(JobTestSupport.json("d1", "qa", "The bridge opened in May.", "When did the bridge open?")),
        "driver", 0, () -> e);
    assertEquals(JobSchemas.OK, r.getAs("status"), (String) r.getAs("error"));
    assertEquals(1, e.tokenizations);
    assertEquals((int) r.getAs("input_tokens"), e.generated.promptIds().length);
  }

  @Test
  void aTooLongDocumentIsTokenizedOnceAndHasOneError() {
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, PolicySpec.DENSE, false);
    CountingEngine e = new CountingEngine();
    Row r = p.process(parsed(JobTestSupport.json("d1", "summary", longText(300), null)), "driver", 0, () -> e);
    assertEquals(JobSchemas.TOO_LONG, r.getAs("status"));
    assertEquals("prompt has " + r.getAs("input_tokens") + " tokens; the context limit is 96"
        + " (run with --truncate to keep the head and tail of the document)", r.getAs("error"));
    assertEquals(1, e.tokenizations);
    assertNull(e.generated, "a prompt over the context never reaches generate");
  }

  @Test
  void aTooLongConversationHasTheSameError() {
    DocumentProcessor p = new DocumentProcessor(SPEC, "r1", 4, PolicySpec.DENSE, true);
    Row r = run(p, "{\"doc_id\":\"c\",\"messages\":[{\"role\":\"user\",\"content\":\"" + longText(300) + "\"}]}");
    assertEquals(JobSchemas.TOO_LONG, r.getAs("status"));
    assertEquals("prompt has " + r.getAs("input_tokens") + " tokens; the context limit is 96"
        + " (--truncate cuts documents, not conversations)", r.getAs("error"));
  }
}
