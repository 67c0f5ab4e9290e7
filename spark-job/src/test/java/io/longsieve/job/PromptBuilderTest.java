package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.job.PromptBuilder.Document;
import io.longsieve.job.PromptBuilder.Prompt;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What the model is asked, per task; the document part stands alone so --truncate cuts only it. */
class PromptBuilderTest {

  @Test
  void summaryAsksForASummaryOfTheDocument() {
    Prompt p = PromptBuilder.build("summary", "  The harbour froze.  ", null, null);
    assertEquals("The harbour froze.", p.body());
    assertTrue(p.head().startsWith("Summarize the following document"));
    assertTrue(p.text().endsWith("Summary:"));
  }

  @Test
  void qaPutsTheQuestionAfterTheDocument() {
    Prompt p = PromptBuilder.build("qa", "The school opened in 1998.", null, "When did it open?");
    assertEquals("The school opened in 1998.", p.body());
    assertEquals("\n\nQuestion: When did it open?\nAnswer:", p.tail());
  }

  @Test
  void multiDocQaNumbersAndTitlesTheDocuments() {
    Prompt p = PromptBuilder.build("multi_doc_qa", null,
        List.of(new Document("Farm", "Cows graze."), new Document(null, "The bridge is old.")), "What is old?");
    assertEquals("Document 1: Farm\nCows graze.\n\nDocument 2\nThe bridge is old.", p.body());
    assertTrue(p.text().contains("Some documents may be irrelevant."));
    assertTrue(p.text().endsWith("Question: What is old?\nAnswer:"));
  }
}
