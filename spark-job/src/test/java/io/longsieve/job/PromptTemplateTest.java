package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.job.PromptBuilder.Document;
import io.longsieve.job.PromptBuilder.Prompt;
import io.longsieve.job.PromptBuilder.Values;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** Templates parse once, refuse what is malformed with its position, and fill values as data. */
class PromptTemplateTest {

  private static Prompt render(String template, Values v) {
    return PromptBuilder.build(PromptTemplate.parse(template), v);
  }

  @Test
  void placeholdersAreTheTextDocumentsQuestionAndAnyColumn() {
    PromptTemplate t = PromptTemplate.parse("For {audience}: {text}\nQ: {question} ({lang})");
    assertEquals(Set.of("audience", "text", "question", "lang"), t.placeholders());
    Prompt p = PromptBuilder.build(t, new Values(" The dam broke. ", null, "What broke?",
        Map.of("audience", "children", "lang", "en")));
    assertEquals("For children: ", p.head());
    assertEquals("The dam broke.", p.body(), "the document part, the one --truncate cuts, values stripped");
    assertEquals("\nQ: What broke? (en)", p.tail());
  }

  @Test
  void doubledBracesAreLiteralBraces() {
    Prompt p = render("Reply as JSON {{\"answer\": ...}} about {text}", new Values("x", null, null, null));
    assertEquals("Reply as JSON {\"answer\": ...} about x", p.text());
  }

  @Test
  void documentsRenderNumberedWithTitles() {
    Prompt p = render("{documents}", new Values(null, List.of(new Document("A", "one"), new Document(null, "two")), null, null));
    assertEquals("Document 1: A\none\n\nDocument 2\ntwo", p.body());
  }

  @Test
  void aTemplateWithoutPlaceholdersIsTheWholePrompt() {
    Prompt p = render("Write a haiku about rivers.", new Values(null, null, null, null));
    assertEquals("Write a haiku about rivers.", p.text());
    assertEquals("", p.body());
  }

  @Test
  void malformedTemplatesAreRefusedNamingTheFaultAndPosition() {
    assertTrue(assertThrows(IllegalArgumentException.class, () -> PromptTemplate.parse("Summarise {text"))
        .getMessage().startsWith("unbalanced '{' at character 10"));
    assertTrue(assertThrows(IllegalArgumentException.class, () -> PromptTemplate.parse("{text} }"))
        .getMessage().startsWith("unbalanced '}' at character 7"));
    assertTrue(assertThrows(IllegalArgumentException.class, () -> PromptTemplate.parse("a {te{xt} b"))
        .getMessage().startsWith("unbalanced '{' at character 2"));
    assertTrue(assertThrows(IllegalArgumentException.class, () -> PromptTemplate.parse("a {} b"))
        .getMessage().contains("placeholder {} at character 2"));
    assertTrue(assertThrows(IllegalArgumentException.class, () -> PromptTemplate.parse("{the text}"))
        .getMessage().contains("is not a column name"));
    assertThrows(IllegalArgumentException.class, () -> PromptTemplate.parse("  "));
  }

  @Test
  void aPlaceholderTheRowHasNoValueForIsNamed() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> render("{text} in {lang}", new Values("x", null, null, Map.of())));
    assertEquals("the prompt template's {lang} has no value: the row has no string, number or boolean field 'lang'",
        e.getMessage());
    assertTrue(assertThrows(IllegalArgumentException.class, () -> render("{documents}", new Values("x", null, null, null)))
        .getMessage().contains("no 'documents' array"));
  }

  @Test
  void userTextIsDataNeverTemplateCode() {
    // a document that holds placeholders, doubled braces and Jinja comes out as it is: values are not re-read
    String text = "Ignore this: {question} {{text}} {lang} {% for x in y %}{{ 7 * 7 }}{% endfor %} }";
    Prompt p = render("Doc: {text}\nQ: {question}", new Values(text, null, "the real question {text}",
        Map.of("lang", "en")));
    assertEquals(text, p.body());
    assertEquals("\nQ: the real question {text}", p.tail());
  }

  @Test
  void thePresetsAreTemplatesWithTheTrainedWording() {
    for (String name : PromptBuilder.PRESETS.keySet()) PromptTemplate.parse(PromptBuilder.PRESETS.get(name));
    Prompt p = PromptBuilder.build("qa", "The school opened in 1998.", null, "When did it open?");
    assertEquals("Answer the question using only the document below. Answer briefly.\n\nDocument:\n"
        + "The school opened in 1998.\n\nQuestion: When did it open?\nAnswer:", p.text());
  }
  @Test
  void theSharedHeadIsTheTextBeforeTheFirstPerRowPlaceholder() {
    Values v = new Values(" The dam broke. ", null, "What broke?", Map.of("audience", "children"));
    assertEquals("Document: The dam broke.\nQ: ", PromptTemplate.parse("Document: {text}\nQ: {question}").sharedHead(v::get));
    assertEquals("For ", PromptTemplate.parse("For {audience}: {text} {question}").sharedHead(v::get));
    assertEquals("Sum up The dam broke.!", PromptTemplate.parse("Sum up {text}!").sharedHead(v::get)); // no per-row part
    assertEquals("", PromptTemplate.parse("{question} {text}").sharedHead(v::get));
  }
}
