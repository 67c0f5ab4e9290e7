package io.longsieve.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The transformers reference outputs that tools/make_tiny_checkpoints.py wrote next to each test
 * model (goldens.json): token ids, first and last logits, and a 40-step greedy continuation with
 * the top-1/top-2 margin of every step.
 */
public record Goldens(List<Case> cases) {

  public static final Path MODELS = Path.of("src/test/resources/models");

  /** One prompt. {@code chatPrompt} is set for the chat-template case, whose ids exclude the tokenizer's BOS. */
  public record Case(String id, String prompt, String chatPrompt, int[] inputIds, float[] logitsFirst,
                     float[] logitsLast, int[] greedyIds, float[] greedyMargins) {}

  public static Goldens read(Path modelDir) throws IOException {
    JsonNode root = new ObjectMapper().readTree(modelDir.resolve("goldens.json").toFile());
    List<Case> cases = new ArrayList<>();
    for (JsonNode c : root.path("cases")) cases.add(parse(c.path("id").asText(), c, null));
    JsonNode chat = root.path("chat");
    if (chat.isObject() && chat.has("input_ids")) cases.add(parse("chat", chat, chat.path("chat_prompt").asText()));
    return new Goldens(cases);
  }

  private static Case parse(String id, JsonNode c, String chatPrompt) {
    return new Case(id, c.path("prompt").asText(), chatPrompt, ints(c.path("input_ids")), floats(c.path("logits_first")),
        floats(c.path("logits_last")), ints(c.path("greedy_ids")), floats(c.path("greedy_margins")));
  }

  public static int[] ints(JsonNode a) {
    int[] out = new int[a.size()];
    for (int i = 0; i < out.length; i++) out[i] = a.get(i).asInt();
    return out;
  }

  public static float[] floats(JsonNode a) {
    float[] out = new float[a.size()];
    for (int i = 0; i < out.length; i++) out[i] = (float) a.get(i).asDouble();
    return out;
  }

  /** max |a - b| / max |b|: the error relative to the scale of the reference. */
  public static double relativeError(float[] a, float[] b) {
    double maxDiff = 0, maxRef = 0;
    for (int i = 0; i < b.length; i++) {
      maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
      maxRef = Math.max(maxRef, Math.abs(b[i]));
    }
    return maxDiff / maxRef;
  }
}
