package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A chat template is code from the checkpoint folder: one that goes past a bound of
 * {@link TemplateLimits} is refused when the model loads, with the file and the bound in one line,
 * never cut short silently.
 */
class ChatTemplateBoundsTest {

  @TempDir Path dir;

  private Path writeTemplate(String template) throws IOException {
    Path file = dir.resolve("tokenizer_config.json");
    Files.writeString(file, new ObjectMapper().writeValueAsString(Map.of("chat_template", template)));
    return file;
  }

  private CheckpointException refused(String template, TemplateLimits limits) throws IOException {
    writeTemplate(template);
    var e = assertThrows(CheckpointException.class, () -> ChatTemplate.load(dir, limits));
    assertTrue(e.getMessage().contains("tokenizer_config.json"), e.getMessage());
    assertTrue(e.getMessage().contains("goes past its bounds"), e.getMessage());
    assertEquals(1, e.getMessage().lines().count(), e.getMessage());
    return e;
  }

  @Test
  void hugeRangeIsRefusedNotTruncated() throws IOException {
    var e = refused("{% for i in range(100000000) %}x{% endfor %}{{ messages[0]['content'] }}", TemplateLimits.DEFAULT);
    assertTrue(e.getMessage().contains("range() of 100000000 values (at most 100000)"), e.getMessage());
  }

  @Test
  void nestedLoopsAreRefusedWithinSeconds() {
    String nested = "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}"
        + "{% endfor %}{% endfor %}{% endfor %}{{ messages[0]['content'] }}";
    var e = assertTimeoutPreemptively(Duration.ofSeconds(10), () -> refused(nested, TemplateLimits.DEFAULT));
    assertTrue(e.getMessage().contains("more than 1000000 template steps"), e.getMessage());
  }

  @Test
  void hugeOutputIsRefused() throws IOException {
    String kilobyte = "x".repeat(1024);
    var e = refused("{% for i in range(5000) %}" + kilobyte + "{% endfor %}", TemplateLimits.DEFAULT);
    assertTrue(e.getMessage().contains("output of more than"), e.getMessage());
  }

  @Test
  void slowTemplateIsStoppedByTheClock() {
    // plenty of steps allowed, 50 ms of time: the wall-clock bound is what stops it
    TemplateLimits fastClock = new TemplateLimits(100_000, Long.MAX_VALUE, 1L << 20, 4, 10, Duration.ofMillis(50));
    String nested = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
    var e = assertTimeoutPreemptively(Duration.ofSeconds(10), () -> refused(nested, fastClock));
    assertTrue(e.getMessage().contains("more than 50 ms"), e.getMessage());
  }

  @Test
  void templateThatCannotRenderIsRefusedAtLoad() throws IOException {
    writeTemplate("{{ messages[0]['content'] | no_such_filter_or_function() }}{% for %}");
    var e = assertThrows(CheckpointException.class, () -> ChatTemplate.load(dir));
    assertTrue(e.getMessage().contains("tokenizer_config.json") && e.getMessage().contains("cannot be rendered"),
        e.getMessage());
  }

  @Test
  void rangeKeepsPythonMeaningWithinTheBound() throws IOException {
    writeTemplate("{% for i in range(3) %}{{ i }}{% endfor %}|{% for i in range(1, 10, 3) %}{{ i }}{% endfor %}"
        + "|{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}|{{ range(4) | length }}|{{ messages | length }}");
    assertEquals("012|147|531|4|1", ChatTemplate.load(dir).render(null, "hi"));
  }

  @Test
  void aLongDocumentIsNotRefusedForItsLength() throws IOException {
    writeTemplate(ChatTemplateTest.LLAMA3);
    String doc = "The harbour master logged 412 crates before noon. ".repeat(60_000); // 3 MB, above the base bound
    String out = ChatTemplate.load(dir).render("Be brief.", doc);
    assertTrue(out.contains(doc.trim()), "document missing from the prompt");
  }

  @Test
  void aBoundPassedAtRenderTimeIsAOneLineError() throws IOException {
    // passes the probe (short text), but repeats the user text 10 times: above 4 × the input
    writeTemplate("{% for i in range(10) %}{{ messages[0]['content'] }}{% endfor %}");
    ChatTemplate t = ChatTemplate.load(dir);
    var e = assertThrows(IllegalArgumentException.class, () -> t.render(null, "y".repeat(2_000_000)));
    assertTrue(e.getMessage().contains("went past its bounds") && e.getMessage().contains("output of more than"),
        e.getMessage());
  }
}
