package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;

/** Each kind of bad input line becomes a bad_input row whose message names the problem. */
class DocumentParserTest {

  private static Row parse(String line) {
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
    Row r = parse("[1, 2, 3]");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("not a JSON object at docs.jsonl:7", error(r));
  }

  @Test
  void missingTaskIsBadInput() {
    Row r = parse("{\"doc_id\":\"d1\",\"text\":\"Some text.\"}");
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("missing field 'task'", error(r));
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
        "docs.jsonl", "file:/data/docs.jsonl", 3);
    assertEquals(JobSchemas.BAD_INPUT, status(r));
    assertEquals("invalid UTF-8 in docs.jsonl:3", error(r));
  }

  @Test
  void aRowWithoutDocIdGetsItsPositionAndIsProcessed() {
    Row r = parse("{\"task\":\"summary\",\"text\":\"Some text.\"}");
    assertNull(status(r), "valid apart from the id, so it runs");
    assertEquals("docs.jsonl:7", r.getAs("doc_id"));
    assertEquals(true, r.getAs("id_generated"));
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
}
