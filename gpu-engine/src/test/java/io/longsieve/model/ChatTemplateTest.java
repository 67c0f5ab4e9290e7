package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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

class ChatTemplateTest {

  // The stock Llama-3 instruct template, as it appears in tokenizer_config.json.
  static final String LLAMA3 = "{% set loop_messages = messages %}{% for message in loop_messages %}"
      + "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}"
      + "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
      + "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

  @TempDir Path dir;

  private ChatTemplate write(Map<String, Object> config) throws IOException {
    Files.writeString(dir.resolve("tokenizer_config.json"), new ObjectMapper().writeValueAsString(config));
    return ChatTemplate.load(dir);
  }

  @Test
  void rendersLlama3TemplateLikeTransformers() throws IOException {
    ChatTemplate t = write(Map.of("chat_template", LLAMA3, "bos_token", "<|begin_of_text|>", "eos_token", "<|eot_id|>"));
    assertTrue(t.hasTemplate());
    assertEquals("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are brief.<|eot_id|>"
        + "<|start_header_id|>user<|end_header_id|>\n\nSummarise: the cat sat.<|eot_id|>"
        + "<|start_header_id|>assistant<|end_header_id|>\n\n", t.render("You are brief.", "  Summarise: the cat sat. "));
    assertEquals("<|eot_id|>", t.eosToken());
  }

  @Test
  void raiseExceptionInTemplateBecomesAClearError() throws IOException {
    ChatTemplate t = write(Map.of("chat_template",
        "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}ok"));
    var e = assertThrows(IllegalArgumentException.class, () -> t.render("sys", "hi"));
    assertTrue(e.getMessage().contains("System role not supported"), e.getMessage());
    assertEquals("ok", t.render(null, "hi"));
  }

  @Test
  void withoutTemplateFallsBackToPlainLayout() throws IOException {
    ChatTemplate t = write(Map.of("bos_token", "<s>"));
    assertFalse(t.hasTemplate());
    assertEquals("User: hello\n\nAssistant:", t.render(null, "hello"));
  }

  @Test
  void noTokenizerConfigAtAllIsTheFallbackToo() {
    assertFalse(ChatTemplate.load(dir).hasTemplate());
  }

  // ---- text is data: each Jinja construct inside a message comes out verbatim, unexecuted ----

  /** A template that prints each message's content through a variable, as Llama 3's does. */
  private ChatTemplate llama3() throws IOException {
    return write(Map.of("chat_template", LLAMA3, "bos_token", "<|begin_of_text|>", "eos_token", "<|eot_id|>"));
  }

  private void assertVerbatim(String text) throws IOException {
    ChatTemplate t = llama3();
    String asUser = t.render(null, text);
    assertTrue(asUser.contains("<|end_header_id|>\n\n" + text + "<|eot_id|>"), asUser);
    String asSystem = t.render(text, "hi");
    assertTrue(asSystem.contains("<|end_header_id|>\n\n" + text + "<|eot_id|>"), asSystem);
  }

  @Test
  void expressionInUserTextIsNotEvaluated() throws IOException {
    assertVerbatim("what is {{ 7 * 6 }} and {{ bos_token }} and {{ messages }}?");
  }

  @Test
  void statementInUserTextIsNotExecuted() throws IOException {
    assertVerbatim("{% set add_generation_prompt = false %}{% if true %}yes{% else %}no{% endif %}");
  }

  @Test
  void commentInUserTextIsKept() throws IOException {
    assertVerbatim("before {# hidden? #} after");
  }

  @Test
  void raiseExceptionInUserTextDoesNotRaise() throws IOException {
    assertVerbatim("{{ raise_exception('boom') }}");
  }

  @Test
  void loopInUserTextIsNotExpanded() throws IOException {
    String text = "{% for i in range(1000) %}word {% endfor %}";
    assertVerbatim(text);
    assertEquals(1, llama3().render(null, text).split("word", -1).length - 1);
  }

  @Test
  void nestedLoopsInUserTextReturnAtOnce() throws IOException {
    String text = "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}"
        + "{% endfor %}{% endfor %}{% endfor %}";
    assertTimeoutPreemptively(Duration.ofSeconds(5), () -> assertVerbatim(text));
  }

  @Test
  void halfOpenAndRawTagsInUserTextAreKept() throws IOException {
    assertVerbatim("{% raw %}{{ x }}{% endraw %} and an unclosed {{ and {% and {#");
  }

  // ---- whitespace control ----

  /** The regex form applyWhitespaceControl replaced: same result, but quadratic in whitespace runs. */
  private static String byRegex(String t) {
    return t.replaceAll("\\s*(\\{[{%#])-", "$1").replaceAll("-([}%#]\\})\\s*", "$1");
  }

  @Test
  void whitespaceControlMatchesTheRegexForm() {
    String[] parts = {"{{-", "-}}", "{%-", "-%}", "{#-", "-#}", "{{", "}}", "-", "{", "}", " ", "\n", "\t", "x", "%", "#"};
    java.util.Random r = new java.util.Random(16);
    for (int c = 0; c < 2000; c++) {
      StringBuilder b = new StringBuilder();
      for (int i = 0, n = r.nextInt(12); i < n; i++) b.append(parts[r.nextInt(parts.length)]);
      assertEquals(byRegex(b.toString()), ChatTemplate.applyWhitespaceControl(b.toString()), b.toString());
    }
  }

  @Test
  void aLongRunOfWhitespaceLoadsInLinearTime() {
    String t = " ".repeat(2_000_000) + "{{- 'x' -}}" + " ".repeat(2_000_000);
    String out = assertTimeoutPreemptively(Duration.ofSeconds(5), () -> ChatTemplate.applyWhitespaceControl(t));
    assertEquals("{{ 'x' }}", out);
  }

  @Test
  void aConversationRendersEveryTurnInOrderEndingWhereTheAssistantSpeaks() throws IOException {
    ChatTemplate t = llama3();
    var turns = java.util.List.of(new ChatTemplate.Message("system", "Be brief."), new ChatTemplate.Message("user", "Hi"),
        new ChatTemplate.Message("assistant", "Hello."), new ChatTemplate.Message("user", "{{ 7 * 7 }} {% if x %}"));
    String out = t.render(turns);
    assertEquals(t.render("Be brief.", "Hi").replace("<|start_header_id|>assistant<|end_header_id|>\n\n", "")
        + "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
        + "<|start_header_id|>user<|end_header_id|>\n\n{{ 7 * 7 }} {% if x %}<|eot_id|>"
        + "<|start_header_id|>assistant<|end_header_id|>\n\n", out, "the turns' text is data there too");
  }

  @Test
  void aConversationWithoutTemplateIsThePlainLayout() throws IOException {
    ChatTemplate t = write(Map.of());
    assertEquals("System: S\n\nUser: A\n\nAssistant: B\n\nUser: C\n\nAssistant:", t.render(java.util.List.of(
        new ChatTemplate.Message("system", "S"), new ChatTemplate.Message("user", "A"),
        new ChatTemplate.Message("assistant", "B"), new ChatTemplate.Message("user", "C"))));
  }
}
