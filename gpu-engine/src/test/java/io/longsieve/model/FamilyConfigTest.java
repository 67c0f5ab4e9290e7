package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What the engine reads from the config.json of the checkpoints people run on long documents
 * (src/test/resources/configs): Qwen3 with YaRN, Qwen2.5 with YaRN, Phi-3.5-mini and Phi-4-mini
 * (LongRoPE, partial rotary), Gemma 3 12B (interleaved windows, two bases), Mistral-Nemo (head_dim
 * 128 with hidden 5120) and the DeepSeek-R1 distills (Llama and Qwen2 architectures).
 */
class FamilyConfigTest {

  private static final ObjectMapper JSON = new ObjectMapper();

  static ObjectNode json(String name) throws Exception {
    return (ObjectNode) JSON.readTree(Path.of("src/test/resources/configs", name + ".json").toFile());
  }

  static ModelConfig parse(String name) throws Exception {
    return ModelConfig.parse(json(name), name);
  }

  @Test
  void qwen3WithYarnReachesFourTimesItsOriginalWindow() throws Exception {
    ModelConfig c = parse("qwen3-8b-yarn");
    assertEquals("qwen3", c.modelType());
    assertEquals(128, c.headDim());
    assertTrue(c.traits().qkNorm());
    assertFalse(c.attentionBias());
    assertEquals("yarn", c.ropeScaling().type());
    assertEquals(4.0, c.ropeScaling().factor());              // the explicit factor, not 40960 / 32768
    assertEquals(32768, c.ropeScaling().originalMaxPositions());
    assertEquals(0.1 * Math.log(4) + 1, c.ropeScaling().attentionFactor(), 1e-12);
    assertEquals(131072, c.contextLength());
    assertEquals(0, c.slidingLayers());
  }

  @Test
  void qwen25WithYarnKeepsItsBiases() throws Exception {
    ModelConfig c = parse("qwen2.5-7b-yarn");
    assertTrue(c.attentionBias());
    assertEquals("yarn", c.ropeScaling().type());           // the 4.x "type" key
    assertEquals(131072, c.contextLength());
    assertEquals(0, c.slidingLayers());                      // use_sliding_window false
  }

  @Test
  void phi35MiniIsLongRopeWithAFullWidthWindowThatNeverBinds() throws Exception {
    ModelConfig c = parse("phi-3.5-mini");
    assertTrue(c.traits().fusedProjections());
    assertEquals(96, c.headDim());
    assertEquals(96, c.rotaryDim());
    assertEquals("longrope", c.ropeScaling().type());      // "type": "longrope"
    assertEquals(4096, c.ropeScaling().originalMaxPositions());
    assertEquals(Math.sqrt(1 + Math.log(32) / Math.log(4096)), c.ropeScaling().attentionFactor(), 1e-12);
    assertEquals(0, c.slidingLayers());                      // sliding_window 262144 >= the 131072 context
    assertEquals(131072, c.contextLength());
  }

  @Test
  void phi4MiniRotatesThreeQuartersOfEachHead() throws Exception {
    ModelConfig c = parse("phi-4-mini");
    assertEquals(128, c.headDim());
    assertEquals(96, c.rotaryDim());
    assertEquals(48, c.ropeScaling().shortFactor().size());
    assertTrue(c.tieWordEmbeddings());
    Rope r = new Rope(c);
    assertEquals(48, r.inverseFrequencies().length);
    assertEquals(64, r.deviceInverseFrequencies().length);
    assertEquals(0f, r.deviceInverseFrequencies()[63]);    // pass-through pairs: no rotation on the GPU
  }

  @Test
  void phi3TakesOnlyDefaultOrLongRope() throws Exception {
    ObjectNode j = json("phi-3.5-mini");
    ((ObjectNode) j.get("rope_scaling")).put("type", "su");        // the older name: still longrope
    assertEquals("longrope", ModelConfig.parse(j, "c").ropeScaling().type());
    ((ObjectNode) j.get("rope_scaling")).put("type", "linear");
    var e = assertThrows(CheckpointException.class, () -> ModelConfig.parse(j, "c"));
    assertTrue(e.getMessage().contains("linear"), e.getMessage());
  }

  @Test
  void gemma3InterleavesFiveLocalLayersWithOneGlobal() throws Exception {
    ModelConfig c = parse("gemma-3-12b-text");
    assertEquals(48, c.numLayers());
    assertEquals(40, c.slidingLayers());
    for (int l = 0; l < 48; l++) assertEquals((l + 1) % 6 == 0 ? 0 : 1024, c.window(l), "layer " + l);
    assertEquals(1_000_000.0, c.ropeTheta());
    assertEquals("linear", c.ropeScaling().type());
    assertEquals(8.0, c.ropeScaling().factor());
    assertEquals(10_000.0, c.layerKind(0).ropeTheta());
    assertEquals("default", c.layerKind(0).ropeScaling().type());
    FamilyTraits t = c.traits();
    assertTrue(t.qkNorm() && t.unitOffsetNorms() && t.sandwichNorms() && t.geglu());
    assertEquals(Math.sqrt(3840), t.embedScale(), 1e-12);
    assertEquals(1 / 16.0, t.queryScale(), 1e-12);           // query_pre_attn_scalar 256
    assertEquals(0, t.finalLogitSoftcap());
    assertTrue(c.tieWordEmbeddings());                       // Gemma 3's default, absent from the file
    assertEquals(131072, c.contextLength());
  }

  @Test
  void gemma3PerLayerTypeRopeParametersOfTransformers5() throws Exception {
    ObjectNode j = json("gemma-3-12b-text");
    j.remove("rope_scaling");
    j.remove("rope_theta");
    j.remove("rope_local_base_freq");
    j.set("rope_parameters", JSON.readTree("{\"full_attention\":{\"rope_type\":\"linear\",\"factor\":8.0,"
        + "\"rope_theta\":1000000.0},\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0}}"));
    ModelConfig c = ModelConfig.parse(j, "c");
    assertEquals(parse("gemma-3-12b-text").layerKinds(), c.layerKinds());
  }

  @Test
  void mistralNemoHasHeadsNarrowerThanHiddenOverHeads() throws Exception {
    ModelConfig c = parse("mistral-nemo-12b");
    assertEquals(128, c.headDim());
    assertEquals(4096, c.qDim());
    assertEquals(5120, c.hiddenSize());
    assertEquals(0, c.slidingLayers());                      // sliding_window null
    assertEquals(1024000, c.contextLength());
  }

  @Test
  void deepSeekR1DistillsAreLlamaAndQwen2() throws Exception {
    ModelConfig llama = parse("deepseek-r1-distill-llama-8b");
    assertEquals("llama", llama.modelType());
    assertTrue(llama.ropeScaling().isLlama3());
    assertEquals(FamilyTraits.llama(128), llama.traits());
    ModelConfig qwen = parse("deepseek-r1-distill-qwen-7b");
    assertEquals("qwen2", qwen.modelType());
    assertTrue(qwen.attentionBias());
    assertEquals(0, qwen.slidingLayers());                   // sliding_window 4096 but use_sliding_window false
    assertEquals(512, qwen.kvDim());
  }

  @Test
  void qwen2SlidesFromMaxWindowLayersOn() throws Exception {
    ObjectNode j = json("deepseek-r1-distill-qwen-7b");
    j.put("use_sliding_window", true);
    j.put("max_window_layers", 20);
    ModelConfig c = ModelConfig.parse(j, "c");
    assertEquals(8, c.slidingLayers());
    assertEquals(0, c.window(19));
    assertEquals(4096, c.window(20));
  }

  @Test
  void refusalsNameTheField() throws Exception {
    ObjectNode j = json("qwen3-8b-yarn");
    j.put("attention_bias", true);
    assertTrue(assertThrows(CheckpointException.class, () -> ModelConfig.parse(j, "c")).getMessage().contains("attention_bias"));
    ObjectNode g = json("gemma-3-12b-text");
    g.put("hidden_activation", "relu");
    assertTrue(assertThrows(CheckpointException.class, () -> ModelConfig.parse(g, "c")).getMessage().contains("relu"));
    ObjectNode p = json("phi-4-mini");
    ((ObjectNode) p.get("rope_scaling")).set("short_factor", JSON.readTree("[1.0, 2.0]"));
    assertTrue(assertThrows(CheckpointException.class, () -> ModelConfig.parse(p, "c")).getMessage().contains("48"));
    ObjectNode m = json("gemma-3-12b-text");
    m.put("model_type", "gemma3");
    m.set("text_config", JSON.createObjectNode());
    assertTrue(assertThrows(CheckpointException.class, () -> ModelConfig.parse(m, "c")).getMessage().contains("gemma3_text"));
    ObjectNode q = json("qwen3-8b-yarn");
    q.set("layer_types", JSON.readTree("[\"chunked_attention\"]"));
    assertTrue(assertThrows(CheckpointException.class, () -> ModelConfig.parse(q, "c")).getMessage().contains("layer_types"));
  }

  @Test
  void linearAndDynamicScalings() throws Exception {
    ObjectNode j = json("llama-3.1-8b");
    j.set("rope_scaling", JSON.readTree("{\"rope_type\":\"dynamic\",\"factor\":2.0}"));
    j.put("max_position_embeddings", 8192);
    ModelConfig c = ModelConfig.parse(j, "c");
    assertEquals("dynamic", c.ropeScaling().type());
    assertEquals(16384, c.contextLength());
    Rope r = new Rope(c);
    assertTrue(r.dependsOnLength());
    assertEquals(r, r.atLength(8192));                        // within max_position_embeddings: the base table
    float[] grown = r.atLength(16384).inverseFrequencies();
    assertTrue(grown[10] < r.inverseFrequencies()[10]);      // a larger base: lower frequencies
    assertEquals(r.inverseFrequencies()[0], grown[0]);      // the first frequency is 1 either way
    j.set("rope_scaling", JSON.readTree("{\"rope_type\":\"linear\",\"factor\":4.0}"));
    ModelConfig lin = ModelConfig.parse(j, "c");
    float[] plain = Rope.inverseFrequencies(128, 500000, RopeScaling.NONE);
    assertEquals(plain[5] / 4, new Rope(lin).inverseFrequencies()[5], 1e-12);
    assertEquals(List.of(), lin.ropeScaling().shortFactor());
  }
}
