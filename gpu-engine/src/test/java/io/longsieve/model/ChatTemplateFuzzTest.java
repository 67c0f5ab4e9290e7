package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Template-like user and system text (Jinja fragments in random order: expressions, statements,
 * comments, loops, raise_exception, unbalanced delimiters) rendered by the test models' real chat
 * templates. Text is data: every case renders, quickly, with the text in the prompt as it was
 * given (trimmed where the template trims); see {@link FuzzCases}.
 */
class ChatTemplateFuzzTest {

  private static final Path MODELS = Path.of("src/test/resources/models");

  private static final String[] FRAGMENTS = {
    "{{", "}}", "{%", "%}", "{#", "#}", "{{-", "-}}", "{%-", "-%}", " ", "\n", "'", "\"", "\\", "|",
    "{{ 7 * 6 }}", "{{ messages }}", "{{ bos_token }}", "{% for i in range(1000) %}", "{% endfor %}",
    "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}", "{% if true %}",
    "{% else %}", "{% endif %}", "{% set x = 'y' * 100000 %}", "{{ raise_exception('boom') }}", "{% raw %}",
    "{% endraw %}", "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "{{ range(100000000) | length }}",
    "{% include 'x' %}", "{{ ''.__class__ }}", "word", "é", "中文", "\u0000", "\ud83d\ude00", "<|eot_id|>"
  };

  private static String templateLike(Random r) {
    StringBuilder b = new StringBuilder();
    for (int i = 0, n = 1 + r.nextInt(12); i < n; i++) b.append(FRAGMENTS[r.nextInt(FRAGMENTS.length)]);
    return b.toString();
  }

  @Test
  void templateLikeTextComesOutVerbatim() {
    ChatTemplate[] templates = {ChatTemplate.load(MODELS.resolve("llama-bf16")), ChatTemplate.load(MODELS.resolve("qwen2-bias")),
        ChatTemplate.load(MODELS.resolve("llama-tied"))};
    FuzzCases.run("template-text", 400, Duration.ofSeconds(5), (seed, r) -> {
      ChatTemplate t = templates[r.nextInt(templates.length)];
      String user = templateLike(r);
      String system = r.nextBoolean() ? templateLike(r) : null;
      String prompt = t.render(system, user);
      assertTrue(prompt.contains(user.trim()), () -> "user text changed in: " + prompt);
      if (system != null) assertTrue(prompt.contains(system.trim()), () -> "system text changed in: " + prompt);
    });
  }
}
