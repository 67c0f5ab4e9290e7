package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.longsieve.model.QuantizationConfig.Activations;
import io.longsieve.model.QuantizationConfig.Granularity;
import io.longsieve.model.QuantizationConfig.Scheme;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * What quantization_config the engine reads and what it refuses, each refusal one line naming the
 * field; FP8 checkpoints whose tensors contradict their config; partial edge blocks.
 */
class QuantizationConfigTest {

  private static final ObjectMapper JSON = new ObjectMapper();

  private static QuantizationConfig parse(String quantizationConfig) throws Exception {
    return QuantizationConfig.parse(JSON.readTree("{\"quantization_config\": " + quantizationConfig + "}"), "config.json");
  }

  private static String refusal(String quantizationConfig) {
    CheckpointException e = assertThrows(CheckpointException.class, () -> parse(quantizationConfig));
    assertEquals(1, e.getMessage().lines().count(), e.getMessage());
    return e.getMessage();
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128}|quant_method 'gptq' is not supported",
      "{\"quant_method\": \"awq\", \"bits\": 4}|quant_method 'awq' is not supported",
      "{\"load_in_4bit\": true}|quant_method 'bitsandbytes' is not supported",
      "{\"quant_method\": \"bitsandbytes\", \"load_in_8bit\": true}|quant_method 'bitsandbytes' is not supported",
      "{\"quant_method\": \"fbgemm_fp8\"}|quant_method 'fbgemm_fp8' is not supported",
      "{\"bits\": 4}|has no quant_method",
      "{\"quant_method\": \"fp8\", \"scale_fmt\": \"ue8m0\"}|scale_fmt 'ue8m0' is not supported",
      "{\"quant_method\": \"fp8\", \"activation_scheme\": \"per_token\"}|activation_scheme 'per_token' is not supported",
      "{\"quant_method\": \"fp8\", \"weight_block_size\": [128]}|weight_block_size must be two positive integers",
      "{\"quant_method\": \"fp8\", \"modules_to_not_convert\": [\"(\"]}|'(' is not a valid regular expression",
      "{\"quant_method\": \"compressed-tensors\", \"format\": \"pack-quantized\", \"config_groups\": {\"g\": {\"targets\": [\"Linear\"],"
          + " \"weights\": {\"type\": \"int\", \"num_bits\": 4}}}}|format 'pack-quantized' is not supported",
      "{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", \"config_groups\": {\"g\": {\"targets\": [\"Linear\"],"
          + " \"weights\": {\"type\": \"int\", \"num_bits\": 8}}}}|compressed-tensors int8 weights are not supported",
      "{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", \"config_groups\": {\"g\": {\"targets\": [\"Linear\"],"
          + " \"weights\": {\"type\": \"float\", \"num_bits\": 4}}}}|compressed-tensors float4 weights are not supported",
      "{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", \"config_groups\": {\"g\": {\"targets\": [\"Linear\"],"
          + " \"weights\": {\"type\": \"float\", \"num_bits\": 8, \"strategy\": \"group\", \"group_size\": 128}}}}|weights strategy 'group' is not supported",
      "{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", \"config_groups\": {\"g\": {\"targets\": [\"Linear\"],"
          + " \"weights\": {\"type\": \"float\", \"num_bits\": 8}, \"input_activations\": {\"type\": \"float\", \"num_bits\": 8,"
          + " \"strategy\": \"token\", \"dynamic\": false}}}}|input_activations strategy 'token' with dynamic false is not supported",
      "{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", \"config_groups\": {\"g\": {\"targets\": [\"Linear\"],"
          + " \"weights\": {\"type\": \"float\", \"num_bits\": 8, \"symmetric\": false}}}}|asymmetric weights",
      "{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", \"sparsity_config\": {\"format\": \"sparse-24-bitmask\"},"
          + " \"config_groups\": {\"g\": {\"targets\": [\"Linear\"], \"weights\": {\"type\": \"float\", \"num_bits\": 8}}}}|sparsity_config",
      "{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\"}|needs config_groups",
  })
  void otherMethodsAndSchemesAreRefusedInOneLineNamingThem(String config, String expected) {
    String m = refusal(config);
    assertTrue(m.startsWith("config.json: quantization_config"), m);
    assertTrue(m.contains(expected), m);
  }

  @Test
  void noQuantizationConfigIsNone() throws Exception {
    assertEquals(QuantizationConfig.NONE, QuantizationConfig.parse(JSON.readTree("{\"model_type\": \"llama\"}"), "c"));
    assertEquals(QuantizationConfig.NONE, QuantizationConfig.parse(JSON.readTree("{\"quantization_config\": null}"), "c"));
  }

  @Test
  void fp8ModulesToNotConvertMatchAsTransformersDoes() throws Exception {
    QuantizationConfig q = parse("{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128],"
        + " \"modules_to_not_convert\": [\"lm_head\", \"model.layers.3\", \"mlp.down_proj\"]}");
    assertEquals(null, q.schemeOf("lm_head"));
    assertEquals(null, q.schemeOf("model.layers.3.self_attn.q_proj"), "prefix match");
    assertEquals(null, q.schemeOf("model.layers.7.mlp.down_proj"), "suffix match");
    Scheme s = q.schemeOf("model.layers.7.mlp.up_proj");
    assertEquals(new Scheme(Granularity.BLOCK, 128, 128, Activations.DYNAMIC_GROUP, 128), s);
    assertEquals("model.layers.7.mlp.up_proj.weight_scale_inv", q.scaleName("model.layers.7.mlp.up_proj.weight"));
    Scheme t = parse("{\"quant_method\": \"fp8\", \"activation_scheme\": \"static\"}").schemeOf("x.q_proj");
    assertEquals(new Scheme(Granularity.TENSOR, 0, 0, Activations.STATIC_TENSOR, 0), t);
  }

  @Test
  void compressedTensorsGroupsThatDisagreeOnAModuleAreRefused() throws Exception {
    String w = "\"weights\": {\"type\": \"float\", \"num_bits\": 8, \"strategy\": \"%s\"}";
    QuantizationConfig q = parse("{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\", \"config_groups\": {"
        + "\"a\": {\"targets\": [\"Linear\"], " + String.format(w, "channel") + "},"
        + "\"b\": {\"targets\": [\"re:.*down_proj\"], " + String.format(w, "tensor") + "}}, \"kv_cache_scheme\": {\"num_bits\": 8}}");
    assertEquals(Granularity.CHANNEL, q.schemeOf("model.layers.0.mlp.up_proj").granularity());
    assertEquals(Activations.WEIGHT_ONLY, q.schemeOf("model.layers.0.mlp.up_proj").activations());
    assertEquals(null, q.schemeOf("model.embed_tokens"), "an embedding is no Linear");
    CheckpointException e = assertThrows(CheckpointException.class, () -> q.schemeOf("model.layers.0.mlp.down_proj"));
    assertTrue(e.getMessage().contains("matches config groups of different schemes"), e.getMessage());
  }

  @Test
  void partialEdgeBlocksUseTheirOwnScale() {
    // a (5, 7) weight in 2 x 3 blocks: a (3, 3) scale grid whose last row and column cover partial blocks
    TensorInfo w = new TensorInfo(Path.of("m"), "l.weight", DType.F8_E4M3, new long[] {5, 7}, 0, 35);
    TensorInfo s = new TensorInfo(Path.of("m"), "l.weight_scale", DType.BF16, new long[] {3, 3}, 0, 18);
    Fp8Weight f = new Fp8Weight(w, s, new Scheme(Granularity.BLOCK, 2, 3, Activations.WEIGHT_ONLY, 0), DType.BF16, null);
    assertEquals(3, f.scaleRows());
    assertEquals(3, f.scaleCols());
    float[] values = new float[35], scales = new float[9];
    for (int i = 0; i < 35; i++) values[i] = DType.e4m3ToFloat((byte) (i + 40));
    for (int i = 0; i < 9; i++) scales[i] = 1f + i / 8f;
    float[] expected = values.clone();
    for (int r = 0; r < 5; r++) {
      for (int c = 0; c < 7; c++) {
        float v = values[r * 7 + c] * scales[(r / 2) * 3 + c / 3];
        expected[r * 7 + c] = DType.bf16ToFloat(DType.floatToBf16(v));
      }
    }
    f.dequantize(values, scales);
    for (int i = 0; i < 35; i++) assertEquals(expected[i], values[i], "element " + i);
  }

  // ---- checkpoints whose tensors contradict their config ----

  @TempDir
  Path tmp;

  private Path fixtureWith(String name, Consumer<ObjectNode> editQuantizationConfig) throws Exception {
    Path src = Fp8CheckpointTest.MODELS.resolve(name), dir = Files.createDirectories(tmp.resolve(name));
    try (var files = Files.list(src)) {
      for (Path f : files.toList()) Files.copy(f, dir.resolve(f.getFileName()));
    }
    ObjectNode root = (ObjectNode) JSON.readTree(dir.resolve("config.json").toFile());
    editQuantizationConfig.accept(root);
    JSON.writeValue(dir.resolve("config.json").toFile(), root);
    return dir;
  }

  private static String loadRefusal(Path dir, String tensor, long... shape) {
    try (Checkpoint ck = Checkpoint.open(dir)) {
      CheckpointException e = assertThrows(CheckpointException.class, () -> ck.infoOfShape(tensor, shape));
      assertEquals(1, e.getMessage().lines().count(), e.getMessage());
      return e.getMessage();
    }
  }

  @Test
  void anF8TensorWithoutQuantizationConfigIsRefused() throws Exception {
    Path dir = fixtureWith("ct-channel", root -> root.remove("quantization_config"));
    String m = loadRefusal(dir, "model.layers.0.self_attn.q_proj.weight", 64, 64);
    assertTrue(m.contains("is F8_E4M3 but config.json has no quantization_config"), m);
  }

  @Test
  void anF8TensorTheConfigKeepsInHighPrecisionIsRefused() throws Exception {
    Path dir = fixtureWith("ct-channel", root -> ((com.fasterxml.jackson.databind.node.ArrayNode)
        root.path("quantization_config").path("ignore")).add("model.layers.1.mlp.up_proj"));
    String m = loadRefusal(dir, "model.layers.1.mlp.up_proj.weight", 160, 64);
    assertTrue(m.contains("keeps module 'model.layers.1.mlp.up_proj' in high precision"), m);
  }

  @Test
  void aScaleOfAnotherGranularityIsRefused() throws Exception {
    Path dir = fixtureWith("ct-channel", root -> {
      JsonNode groups = root.path("quantization_config").path("config_groups");
      ((ObjectNode) groups.path("group_0").path("weights")).put("strategy", "tensor");
    });
    String m = loadRefusal(dir, "model.layers.0.mlp.gate_proj.weight", 160, 64);
    assertTrue(m.contains("scale 'model.layers.0.mlp.gate_proj.weight_scale' has shape [160, 1]"), m);
    assertTrue(m.contains("needs [] or [1]"), m);
  }

  @Test
  void aStaticSchemeWithoutItsInputScaleIsRefused() throws Exception {
    Path dir = fixtureWith("ct-channel", root -> {
      ObjectNode in = (ObjectNode) root.path("quantization_config").path("config_groups").path("group_0").path("input_activations");
      in.put("strategy", "tensor").put("dynamic", false);
    });
    String m = loadRefusal(dir, "model.layers.0.mlp.gate_proj.weight", 160, 64);
    assertTrue(m.contains("static activation scale 'model.layers.0.mlp.gate_proj.input_scale' is missing"), m);
  }

  @Test
  void aCheckpointOfAnotherMethodIsRefusedBeforeItsTensorsAreRead() throws Exception {
    Path dir = fixtureWith("ct-channel", root -> root.putObject("quantization_config").put("quant_method", "gptq"));
    CheckpointException e = assertThrows(CheckpointException.class, () -> Checkpoint.open(dir));
    assertTrue(e.getMessage().contains("quant_method 'gptq' is not supported"), e.getMessage());
  }
}
