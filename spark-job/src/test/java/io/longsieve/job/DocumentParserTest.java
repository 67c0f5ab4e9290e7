package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;

/** Each kind of bad input line becomes a bad_input row whose message names the problem. */
class DocumentParserTest {

  /** The line's one row. */
  private static Row parse(String line) {
    java.util.List<Row> rows = parseAll(line);
    assertEquals(1, rows.size(), rows.toString());
    return rows.get(0);
  }

  private static java.util.List<Row> parseAll(String line) {
    return DocumentParser.parse(line, true, "docs.jsonl", "file:/data/docs.jsonl", 7);
  }

  private static String status(Row r) {
    return r.getAs("status");
  }

  private static String error(Row r) {
    return r.getAs("error");
  }

  @Test
  void validSummaryRowHasNoStatus() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"summary\",\"text\":\"Some text.\",\"reference\":\"ref\"}");
    assertNull(status(r));
    assertEquals("d1", r.getAs("doc_id"));
    assertEquals("summary", r.getAs("task"));
    assertEquals("Some text.", r.getAs("text"));
    assertEquals("ref", r.getAs("reference"));
    assertEquals(false, r.getAs("id_generated"));
  }

  @Test
  void malformedJsonIsBadInputAndNamesTheLine() {
    Row r = parse("{\"doc_id\":\"d1\", \"task\": summary}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertTrue(error(r).startsWith("malformed JSON at docs.jsonl:7"), error(r));
    assertEquals("docs.jsonl:7", r.getAs("doc_id"), "a malformed line gets its position as id");
  }

  @Test
  void textAfterTheObjectIsMalformed() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"summary\",\"text\":\"x\"} {\"doc_id\":\"d2\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertTrue(error(r).startsWith("malformed JSON at docs.jsonl:7: Trailing token"), error(r));
  }

  @Test
  void aFieldGivenTwiceIsMalformed() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"summary\",\"text\":\"x\",\"text\":\"y\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertTrue(error(r).startsWith("malformed JSON at docs.jsonl:7: Duplicate field 'text'"), error(r));
  }

  @Test
  void aJsonValueThatIsNotAnObjectIsBadInput() {
    Row r = parse("\"just a string\"");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("not a JSON object at docs.jsonl:7", error(r));
  }

  @Test
  void missingTaskIsBadInput() {
    Row r = parse("{\"doc_id\":\"d1\",\"text\":\"Some text.\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("missing field 'task' (or 'prompt', the row's own prompt)", error(r));
    assertEquals("d1", r.getAs("doc_id"), "the row keeps its own id");
  }

  @Test
  void unknownTaskIsBadInput() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"translate\",\"text\":\"Some text.\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("unknown task 'translate' (known: summary, qa, multi_doc_qa)", error(r));
  }

  @Test
  void missingTextIsBadInput() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"summary\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("missing field 'text' (or 'documents')", error(r));
  }

  @Test
  void emptyTextIsBadInput() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"summary\",\"text\":\"   \"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("field 'text' is empty", error(r));
  }

  @Test
  void textOfTheWrongTypeIsBadInput() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"summary\",\"text\":42}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("field 'text' must be a string, not a number", error(r));
  }

  @Test
  void qaWithoutQuestionIsBadInput() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"qa\",\"text\":\"Some text.\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("task qa needs a 'question'", error(r));
  }

  @Test
  void multiDocQaWithoutQuestionIsBadInput() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"multi_doc_qa\",\"documents\":[{\"title\":\"A\",\"text\":\"x\"}]}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("task multi_doc_qa needs a 'question'", error(r));
  }

  @Test
  void multiDocQaNeedsDocuments() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"multi_doc_qa\",\"text\":\"x\",\"question\":\"q?\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("task multi_doc_qa needs a non-empty 'documents' array of {title, text}", error(r));
  }

  @Test
  void emptyDocumentsArrayIsBadInput() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"multi_doc_qa\",\"documents\":[],\"question\":\"q?\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("field 'documents' is empty", error(r));
  }

  @Test
  void aDocumentWithoutTextIsBadInput() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"multi_doc_qa\",\"documents\":[{\"title\":\"A\",\"text\":\"x\"},"
        + "{\"title\":\"B\"}],\"question\":\"q?\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("documents[1]: missing field 'text'", error(r));
  }

  @Test
  void textAndDocumentsTogetherAreBadInput() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"qa\",\"text\":\"x\",\"documents\":[{\"text\":\"y\"}],\"question\":\"q?\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("give either 'text' or 'documents', not both", error(r));
  }

  @Test
  void docIdOfTheWrongTypeIsBadInput() {
    Row r = parse("{\"doc_id\":{\"a\":1},\"task\":\"summary\",\"text\":\"x\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("field 'doc_id' must be a string or an integer, not an object", error(r));
  }

  @Test
  void anIntegerDocIdIsAccepted() {
    Row r = parse("{\"doc_id\":1234,\"task\":\"summary\",\"text\":\"x\"}");
    assertNull(status(r));
    assertEquals("1234", r.getAs("doc_id"));
  }

  @Test
  void invalidUtf8IsBadInput() {
    Row r = DocumentParser.parse("{\"doc_id\":\"d1\",\"task\":\"summary\",\"text\":\"\uFFFD\"}", false,
        "docs.jsonl", "file:/data/docs.jsonl", 3).get(0);
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("invalid UTF-8 in docs.jsonl:3", error(r));
  }

  @Test
  void aRowWithoutDocIdGetsAnIdFromItsContentThatDoesNotDependOnWhereItIs() {
    Row r = parse("{\"task\":\"summary\",\"text\":\"Some text.\"}");
    assertNull(status(r), "valid apart from the id, so it runs");
    assertEquals(true, r.getAs("id_generated"));
    String id = r.getAs("doc_id");
    assertTrue(id.matches("auto-[0-9a-f]{16}"), id);
    assertEquals("docs.jsonl:7", r.getAs("source"), "messages still say where it was");
    Row moved = DocumentParser.parse("{ \"text\": \"Some text.\", \"task\": \"summary\" }", true, "renamed.jsonl",
        "file:/data/renamed.jsonl", 99).get(0);
    assertEquals(id, moved.getAs("doc_id"), "same content on another line, in another file, keys reordered");
    Row other = parse("{\"task\":\"summary\",\"text\":\"Other text.\"}");
    assertNotEquals(id, other.getAs("doc_id"));
  }

  @Test
  void multiDocQaKeepsTitlesAndTexts() {
    Row r = parse("{\"doc_id\":\"d1\",\"task\":\"multi_doc_qa\",\"documents\":[{\"title\":\"A\",\"text\":\"one\"},"
        + "{\"text\":\"two\"}],\"question\":\"Which?\",\"extra\":{\"ignored\":true}}");
    assertNull(status(r));
    java.util.List<Row> docs = r.getList(r.fieldIndex("documents"));
    assertEquals(2, docs.size());
    assertEquals("A", docs.get(0).getString(0));
    assertNull(docs.get(1).getString(0));
    assertEquals("two", docs.get(1).getString(1));
    assertEquals(6L, (long) r.getAs("size"));
    assertFalse((boolean) r.getAs("id_generated"));
  }

  @Test
  void aJsonArrayOnOneLineGivesOneRowPerElement() {
    java.util.List<Row> rows = parseAll("[{\"doc_id\":\"a\",\"task\":\"summary\",\"text\":\"One.\"},"
        + "{\"task\":\"summary\",\"text\":\"Two.\"}, 3]");
    assertEquals(3, rows.size());
    assertEquals("a", rows.get(0).getAs("doc_id"));
    assertNull(status(rows.get(0)));
    assertEquals("docs.jsonl:7[0]", rows.get(0).getAs("source"));
    assertNull(status(rows.get(1)));
    assertTrue(((String) rows.get(1).getAs("doc_id")).startsWith(ContentId.PREFIX));
    assertEquals(JobSchemas.BAD_INPUT, status(rows.get(2)));
    assertEquals("not a JSON object at docs.jsonl:7[2]", error(rows.get(2)));
    Row empty = parse("[]");
    assertEquals(JobSchemas.BAD_INPUT, status(empty));
    assertEquals("an empty JSON array at docs.jsonl:7 (one JSON object per line, or an array of objects)", error(empty));
  }

  @Test
  void aLineOverTheLimitIsTooLongAndAValid20MbLineIsRead() {
    String twentyMb = "x".repeat(20 * 1024 * 1024 + 10);
    Row big = parse("{\"doc_id\":\"big\",\"task\":\"summary\",\"text\":\"" + twentyMb + "\"}");
    assertNull(status(big), "a valid 20 MB line is a row (Jackson's default string limit is 20M chars)");
    assertEquals(twentyMb.length(), ((String) big.getAs("text")).length());
    String over = "é".repeat(17 * 1024 * 1024); // 2 bytes each in UTF-8: 34 MB
    Row tooLong = parse("{\"doc_id\":\"huge\",\"task\":\"summary\",\"text\":\"" + over + "\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(tooLong));
    assertEquals("line too long (34.0 MB; limit " + DocumentParser.MAX_LINE_MB + " MB) at docs.jsonl:7", error(tooLong));
  }

  @Test
  void loneSurrogatesAndNulCharactersAreBadInput() {
    Row lone = parse("{\"doc_id\":\"d1\",\"task\":\"summary\",\"text\":\"ab\\ud800cd\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(lone));
    assertEquals("field 'text' holds a lone surrogate \\ud800 at character 2 (not valid Unicode text)", error(lone));
    Row nul = parse("{\"doc_id\":\"d1\",\"task\":\"qa\",\"text\":\"x\",\"question\":\"why\\u0000?\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(nul));
    assertEquals("field 'question' holds a NUL character (\\u0000) at character 3", error(nul));
    Row title = parse("{\"doc_id\":\"d1\",\"task\":\"multi_doc_qa\",\"documents\":[{\"title\":\"\\udc00\",\"text\":\"x\"}],"
        + "\"question\":\"q?\"}");
    assertEquals("documents[0]: field 'title' holds a lone surrogate \\udc00 at character 0 (not valid Unicode text)",
        error(title));
    Row pair = parse("{\"doc_id\":\"d1\",\"task\":\"summary\",\"text\":\"emoji \\ud83d\\ude00 ok\"}");
    assertNull(status(pair), "a surrogate pair is one valid character");
  }

  @Test
  void malformedJsonMessagesShowNoJacksonInternals() {
    for (String line : new String[] {"{\"doc_id\":\"d1\",\"task\":\"summary\",\"text\":\"unterminated",
        "{\"doc_id\":\"d1\",\"task\":\"summary\"", "{\"a\":NaN}", "{\"a\":1} x", "{'a':1}",
        "{\"n\":" + "9".repeat(2000) + "}"}) {
      String e = error(parse(line));
      assertTrue(e.startsWith("malformed JSON at docs.jsonl:7: "), e);
      for (String internal : new String[] {"Source", "REDACTED", "StreamReadFeature", "JsonReadFeature", "`",
          "com.fasterxml", "DeserializationFeature"}) {
        assertFalse(e.contains(internal), internal + " in: " + e);
      }
    }
    assertTrue(error(parse("{\"doc_id\":\"d1\",\"task\":\"summary\"")).contains("column"),
        "says where the object started or stopped");
  }

  // ---- prompts and sampling of the row's own ----

  @Test
  void aRowWithItsOwnPromptNeedsNoTask() {
    Row r = parse("{\"doc_id\":\"p1\",\"prompt\":\"Translate to {lang}: {text}\",\"text\":\"Hallo\",\"lang\":\"French\"}");
    assertNull(status(r), String.valueOf(error(r)));
    assertEquals("Translate to {lang}: {text}", r.getAs("prompt"));
    assertEquals("French", r.<scala.collection.Map<String, String>>getAs("fields").apply("lang"));
  }

  @Test
  void aRowPromptThatDoesNotParseIsBadInput() {
    Row r = parse("{\"doc_id\":\"p1\",\"prompt\":\"Summarise {text\",\"text\":\"x\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertTrue(error(r).startsWith("field 'prompt': unbalanced '{' at character 10"), error(r));
  }

  @Test
  void aPlaceholderWhoseColumnTheRowLacksIsBadInput() {
    Row r = parse("{\"doc_id\":\"p1\",\"prompt\":\"{text} in {lang}\",\"text\":\"x\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertTrue(error(r).contains("{lang} has no value"), error(r));
  }

  @Test
  void theRunTemplateIsCheckedAgainstEachRow() {
    PromptTemplate run = PromptTemplate.parse("Answer {question} from {text}");
    Row ok = DocumentParser.parse("{\"doc_id\":\"a\",\"text\":\"t\",\"question\":\"q\"}", true, "d.jsonl", "file:/d.jsonl", 1, run).get(0);
    assertNull(status(ok), "no task needed with a run template");
    Row bad = DocumentParser.parse("{\"doc_id\":\"b\",\"text\":\"t\"}", true, "d.jsonl", "file:/d.jsonl", 2, run).get(0);
    assertEquals(JobSchemas.BAD_INPUT, status(bad));
    assertTrue(error(bad).startsWith("--prompt-template: the prompt template's {question} has no value"), error(bad));
    Row own = DocumentParser.parse("{\"doc_id\":\"c\",\"prompt\":\"Hi {name}\",\"name\":\"Ann\"}", true, "d.jsonl",
        "file:/d.jsonl", 3, run).get(0);
    assertNull(status(own), "the row's own prompt wins over the run's");
  }

  @Test
  void samplingFieldsAreReadAndChecked() {
    Row r = parse("{\"doc_id\":\"s\",\"task\":\"summary\",\"text\":\"x\",\"max_new_tokens\":7,\"temperature\":0.8,"
        + "\"top_p\":0.9,\"seed\":42,\"stop\":[\"\\n\",\"END\"],\"system\":\"Be brief.\",\"raw\":true}");
    assertNull(status(r), String.valueOf(error(r)));
    assertEquals(7, (int) r.getAs("max_new_tokens"));
    assertEquals(0.8, r.<Double>getAs("temperature"));
    assertEquals(0.9, r.<Double>getAs("top_p"));
    assertEquals(42L, r.<Long>getAs("seed"));
    assertEquals(java.util.List.of("\n", "END"), r.getList(r.fieldIndex("stop")));
    assertEquals("Be brief.", r.getAs("system"));
    assertEquals(Boolean.TRUE, r.getAs("raw"));
    String base = "{\"doc_id\":\"s\",\"task\":\"summary\",\"text\":\"x\",";
    assertEquals("field 'temperature' must be >= 0, not -1.0", error(parse(base + "\"temperature\":-1}")));
    assertEquals("field 'top_p' must be in (0, 1], not 1.5", error(parse(base + "\"top_p\":1.5}")));
    assertEquals("field 'max_new_tokens' must be >= 1, not 0", error(parse(base + "\"max_new_tokens\":0}")));
    assertEquals("field 'seed' must be an integer, not 1.5", error(parse(base + "\"seed\":1.5}")));
    assertEquals("field 'stop' must hold strings, not a number", error(parse(base + "\"stop\":[1]}")));
    assertEquals("field 'raw' must be true or false, not a string", error(parse(base + "\"raw\":\"yes\"}")));
  }

  @Test
  void withoutATemplateTheTaskIsStillRequired() {
    assertEquals("missing field 'task' (or 'prompt', the row's own prompt)", error(parse("{\"doc_id\":\"x\",\"text\":\"t\"}")));
  }

  @Test
  void messagesAreAChatConversationCheckedTurnByTurn() {
    Row r = parse("{\"doc_id\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
        + "{\"role\":\"user\",\"content\":\"Hi {text}\"}]}");
    assertNull(status(r), String.valueOf((Object) error(r)));
    assertEquals(2, r.getList(r.fieldIndex("messages")).size());
    String m = "{\"doc_id\":\"m\",\"messages\":";
    assertEquals("messages[0]: 'role' must be system, user or assistant, not 'bot'",
        error(parse(m + "[{\"role\":\"bot\",\"content\":\"x\"}]}")));
    assertEquals("the last of 'messages' must be the user's (the model answers it)",
        error(parse(m + "[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"y\"}]}")));
    assertEquals("messages[0]: missing field 'content'", error(parse(m + "[{\"role\":\"user\"}]}")));
    assertEquals("field 'messages' is empty", error(parse(m + "[]}")));
    assertEquals("give either 'prompt' or 'messages', not both",
        error(parse(m + "[{\"role\":\"user\",\"content\":\"x\"}],\"prompt\":\"p\"}")));
    assertTrue(error(parse(m + "[{\"role\":\"user\",\"content\":\"x\"}],\"raw\":true}")).startsWith("'raw' does not apply"));
  }

  @Test
  void messagesWithTextDocumentsOrAQuestionAreRefusedNotSilentlyDropped() {
    String m = "{\"doc_id\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],";
    Row text = parse(m + "\"text\":\"ignored?\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(text));
    assertEquals("give either 'messages' or 'text' / 'documents' / 'question', not both: 'messages' is the whole prompt, "
        + "so 'text' would be ignored", error(text));
    assertTrue(error(parse(m + "\"documents\":[{\"text\":\"d\"}]}")).endsWith("so 'documents' would be ignored"));
    assertTrue(error(parse(m + "\"question\":\"q?\"}")).endsWith("so 'question' would be ignored"));
  }

  @Test
  void aTemperatureThatOverflowsTheSamplerIsBadInput() {
    String row = "{\"doc_id\":\"t\",\"task\":\"summary\",\"text\":\"x\",\"temperature\":";
    assertEquals("field 'temperature' must be 0 (greedy) or at least 1.0E-6, not 4.9E-324 (smaller ones overflow the sampler)",
        error(parse(row + "5e-324}")));
    assertNull(status(parse(row + "0}")));
    assertNull(status(parse(row + "0.000001}")));
  }
}
