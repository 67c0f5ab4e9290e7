package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The RoPE tables the engine computes from config.json ({@link Rope}, the one place both backends
 * read) against the ones transformers rotates with, read from the model after loading (goldens'
 * rope_tables): inverse frequencies per layer type to within 2 fp32 ulps, the attention factor, and
 * for dynamic NTK and LongRoPE the tables at lengths past the original window.
 */
class RopeTablesTest {

  @ParameterizedTest
  @ValueSource(strings = {"qwen3-yarn", "phi3-longrope", "gemma3-text", "llama-dynamic", "mistral-nemo"})
  void sameTablesAsTransformers(String name) throws Exception {
    Path dir = Path.of("src/test/resources/models", name);
    ModelConfig c = ModelConfig.read(dir);
    JsonNode tables = new ObjectMapper().readTree(dir.resolve("goldens.json").toFile()).path("rope_tables");
    int checked = 0;
    for (Iterator<Map.Entry<String, JsonNode>> it = tables.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      Rope rope = Rope.forLayer(c, layerOfType(c, e.getKey()));
      JsonNode t = e.getValue();
      assertEquals(t.path("rope_type").asText(), rope.scaling().type(), name + "/" + e.getKey());
      assertClose(t.path("inv_freq"), rope.inverseFrequencies(), name + "/" + e.getKey());
      assertEquals(t.path("attention_scaling").asDouble(), rope.attentionFactor(), 1e-6, name + "/" + e.getKey());
      for (Iterator<Map.Entry<String, JsonNode>> at = t.path("at_length").fields(); at.hasNext(); ) {
        Map.Entry<String, JsonNode> l = at.next();
        assertClose(l.getValue(), rope.atLength(Integer.parseInt(l.getKey())).inverseFrequencies(),
            name + "/" + e.getKey() + " at length " + l.getKey());
        checked++;
      }
      checked++;
    }
    assertTrue(checked >= 1, name);
  }

  /** A layer of the type transformers names ("all": every layer alike). */
  private static int layerOfType(ModelConfig c, String type) {
    for (int l = 0; l < c.numLayers(); l++) {
      boolean sliding = c.layerKind(l).sliding();
      if (type.equals("all") || sliding == type.equals("sliding_attention")) return l;
    }
    throw new AssertionError("no layer of type " + type);
  }

  private static void assertClose(JsonNode expected, float[] got, String where) {
    assertEquals(expected.size(), got.length, where + ": table length");
    for (int i = 0; i < got.length; i++) {
      float want = (float) expected.get(i).asDouble();
      assertTrue(Math.abs(want - got[i]) <= 2 * Math.ulp(want), where + "[" + i + "]: " + got[i] + " vs " + want);
    }
  }
}
