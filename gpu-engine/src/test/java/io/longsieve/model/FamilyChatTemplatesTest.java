package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The chat templates of the families the engine runs (Qwen3, Phi-3.5-mini, Phi-4-mini, Gemma 3,
 * Mistral-Nemo, the DeepSeek-R1 distills; tools/chat_templates) through the engine's sandboxed
 * renderer, against what transformers' apply_chat_template renders from the same template for the
 * same conversations (goldens written by tools/make_tiny_checkpoints.py --templates-out): the same
 * text, or a refusal where the template raises (Gemma's and Nemo's alternation rule).
 */
class FamilyChatTemplatesTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Path GOLDENS = Path.of("src/test/resources/chat-templates/goldens.json");

  static Stream<String> templates() throws Exception {
    List<String> names = new ArrayList<>();
    JSON.readTree(GOLDENS.toFile()).path("templates").fieldNames().forEachRemaining(names::add);
    return names.stream();
  }

  @ParameterizedTest
  @MethodSource("templates")
  void rendersAsTransformersDoes(String name, @TempDir Path dir) throws Exception {
    JsonNode root = JSON.readTree(GOLDENS.toFile());
    JsonNode t = root.path("templates").path(name);
    ObjectNode config = JSON.createObjectNode();
    config.put("chat_template", t.path("chat_template").asText());
    if (!t.path("bos_token").isNull()) config.put("bos_token", t.path("bos_token").asText());
    if (!t.path("eos_token").isNull()) config.put("eos_token", t.path("eos_token").asText());
    Files.writeString(dir.resolve("tokenizer_config.json"), JSON.writeValueAsString(config));
    ChatTemplate template = ChatTemplate.load(dir);
    int compared = 0;
    for (Iterator<Map.Entry<String, JsonNode>> it = t.path("renders").fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> r = it.next();
      List<ChatTemplate.Message> conversation = new ArrayList<>();
      for (JsonNode m : root.path("conversations").path(r.getKey())) {
        conversation.add(new ChatTemplate.Message(m.path("role").asText(), m.path("content").asText()));
      }
      String where = name + "/" + r.getKey();
      if (r.getValue().has("error")) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> template.render(conversation), where);
        assertTrue(e.getMessage().contains(r.getValue().path("error").asText()), where + ": " + e.getMessage());
      } else {
        assertEquals(r.getValue().path("text").asText(), template.render(conversation), where);
      }
      compared++;
    }
    assertEquals(4, compared, name);
  }
}
