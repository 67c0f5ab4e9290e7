package io.longsieve.job.eval;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.longsieve.eval.SuiteGenerator;
import io.longsieve.eval.SuiteItem;
import io.longsieve.eval.SuiteText;
import io.longsieve.eval.TaskPrompts;
import io.longsieve.job.PromptBuilder;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The suite's prompts (what longsieve-needle is trained on, suite-text.json) are the Spark job's
 * prompts (PromptBuilder): one string per task, or the model that answers the suite would not
 * answer the job.
 */
class PromptFormatParityTest {

  @Test
  void suiteUserMessagesAreTheJobsPrompts() {
    SuiteGenerator gen = new SuiteGenerator(SuiteText.load(), s -> s.length() / 4);
    TaskPrompts prompts = TaskPrompts.standard();
    for (String kind : SuiteGenerator.KINDS) {
      SuiteItem it = gen.make(kind, 4, 600, 0.5, 4);
      List<PromptBuilder.Document> docs = it.documents().isEmpty() ? null
          : it.documents().stream().map(d -> new PromptBuilder.Document(d.title(), d.text())).toList();
      String job = PromptBuilder.build(it.task(), it.text(), docs, it.question()).text();
      assertEquals(job, prompts.userMessage(it), kind);
    }
  }
}
