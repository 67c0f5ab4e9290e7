package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.model.QuantizationConfig.Activations;
import io.longsieve.model.QuantizationConfig.Granularity;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * FP8 checkpoints written by tools/make_fp8_checkpoints.py (float8_e4m3fn from torch): the e4m3
 * decode table against PyTorch's, bit for bit; every FP8 weight dequantized exactly as the tool's
 * reference did it (transformers' own dequantization for the fp8 format, compressed-tensors' for
 * compressed-tensors); the schemes and ignore lists read from each config.
 */
class Fp8CheckpointTest {

  static final Path MODELS = Path.of("src/test/resources/models");
  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void e4m3DecodesAsPyTorchDoesBitForBit() throws Exception {
    JsonNode bits = JSON.readTree(MODELS.resolve("fp8-e4m3.json").toFile()).path("f32_bits_by_byte");
    assertEquals(256, bits.size());
    for (int b = 0; b < 256; b++) {
      assertEquals(bits.get(b).asLong() & 0xffffffffL, Float.floatToRawIntBits(DType.e4m3ToFloat((byte) b)) & 0xffffffffL,
          "byte 0x" + Integer.toHexString(b));
    }
    assertEquals(448f, DType.e4m3ToFloat((byte) 0x7e));
    assertTrue(Float.isNaN(DType.e4m3ToFloat((byte) 0x7f)) && Float.isNaN(DType.e4m3ToFloat((byte) 0xff)));
    assertEquals(0x1p-9f, DType.e4m3ToFloat((byte) 0x01), "smallest subnormal");
  }

  @Test
  void e4m3EncodesAsPyTorchCastsClampedValues() throws Exception {
    JsonNode root = JSON.readTree(MODELS.resolve("fp8-e4m3.json").toFile());
    JsonNode xs = root.path("encode_f32_bits"), bytes = root.path("encode_byte");
    assertTrue(xs.size() > 1700, "cases: " + xs.size());
    for (int i = 0; i < xs.size(); i++) {
      float x = Float.intBitsToFloat((int) xs.get(i).asLong());
      assertEquals(bytes.get(i).asInt(), DType.floatToE4m3(x) & 0xff, "fp32 " + x + " (case " + i + ")");
    }
    for (int b = 0; b < 256; b++) {
      float v = DType.e4m3ToFloat((byte) b);
      if (!Float.isNaN(v)) assertEquals(b, DType.floatToE4m3(v) & 0xff, "round trip of byte " + b);
    }
  }

  @Test
  void floatToF16RoundsToNearestEven() {
    for (int h = 0; h < 0x10000; h++) {
      float f = DType.f16ToFloat((short) h);
      if (Float.isNaN(f)) continue;
      assertEquals(h, DType.floatToF16(f) & 0xffff, "half 0x" + Integer.toHexString(h));
    }
    // halfway between 1 and the next half (1 + 2^-10): ties to the even mantissa, 1
    assertEquals(0x3c00, DType.floatToF16(1f + 0x1p-11f) & 0xffff);
    assertEquals(0x3c02, DType.floatToF16(1f + 3 * 0x1p-11f) & 0xffff);
    assertEquals(0x3c01, DType.floatToF16(Math.nextUp(1f + 0x1p-11f)) & 0xffff);
    assertEquals(0x7c00, DType.floatToF16(65520f) & 0xffff, "rounds past the largest half to infinity");
    assertEquals(0x7bff, DType.floatToF16(65519f) & 0xffff);
    assertEquals(0x0001, DType.floatToF16(0x1p-24f * 0.75f) & 0xffff, "above half the smallest subnormal");
    assertEquals(0x0000, DType.floatToF16(0x1p-25f) & 0xffff, "exactly half: ties to even, zero");
    assertEquals(0x8000, DType.floatToF16(-1e-30f) & 0xffff);
    assertEquals(0x0400, DType.floatToF16(Math.nextDown(0x1p-14f)) & 0xffff, "a subnormal that rounds up to the smallest normal");
  }

  @ParameterizedTest
  @ValueSource(strings = {"fp8-block128", "fp8-tensor", "ct-channel", "ct-tensor", "ct-block128"})
  void dequantizesEveryWeightAsTheReference(String name) throws Exception {
    Path dir = MODELS.resolve(name);
    JsonNode checks = JSON.readTree(dir.resolve("goldens.json").toFile()).path("dequantized_weights");
    assertTrue(checks.size() >= 12, name + ": " + checks.size() + " FP8 weights in the goldens");
    try (Checkpoint ck = Checkpoint.open(dir)) {
      for (Iterator<Map.Entry<String, JsonNode>> it = checks.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        TensorInfo t = ck.info(e.getKey());
        assertEquals(DType.F8_E4M3, t.dtype(), e.getKey());
        assertEquals(t.numel(), t.end() - t.start(), "one stored byte per FP8 weight (what inspect counts)");
        float[] w = ck.loadF32(e.getKey(), t.shape());
        double sum = 0;
        for (float v : w) sum += v;
        double ref = e.getValue().path("sum").asDouble();
        assertEquals(ref, sum, 1e-9 * Math.max(1, Math.abs(ref)), name + " " + e.getKey() + ": sum");
        JsonNode idx = e.getValue().path("index"), val = e.getValue().path("value");
        for (int i = 0; i < idx.size(); i++) {
          float expected = (float) val.get(i).asDouble();
          assertEquals(Float.floatToIntBits(expected), Float.floatToIntBits(w[idx.get(i).asInt()]),
              name + " " + e.getKey() + "[" + idx.get(i).asInt() + "]: " + w[idx.get(i).asInt()] + " vs " + expected);
        }
      }
    }
  }

  @Test
  void schemesAndIgnoreListsComeFromEachConfig() {
    try (Checkpoint a = Checkpoint.open(MODELS.resolve("fp8-block128"));
         Checkpoint b = Checkpoint.open(MODELS.resolve("ct-channel"));
         Checkpoint c = Checkpoint.open(MODELS.resolve("ct-block128"));
         Checkpoint d = Checkpoint.open(MODELS.resolve("ct-tensor"));
         Checkpoint e = Checkpoint.open(MODELS.resolve("fp8-tensor"))) {
      QuantizationConfig.Scheme s = a.quantization().schemeOf("model.layers.0.self_attn.q_proj");
      assertEquals(Granularity.BLOCK, s.granularity());
      assertEquals(128, s.blockRows());
      assertEquals(Activations.DYNAMIC_GROUP, s.activations());
      assertEquals(128, s.activationGroup());
      assertNull(a.quantization().schemeOf("model.layers.1.mlp.down_proj"), "modules_to_not_convert");
      assertEquals(DType.BF16, a.info("model.layers.1.mlp.down_proj.weight").dtype());
      assertEquals(DType.F32, a.fp8("model.layers.0.mlp.down_proj.weight").product());

      assertEquals(Activations.DYNAMIC_TOKEN, b.quantization().schemeOf("model.layers.1.self_attn.o_proj").activations());
      assertNull(b.quantization().schemeOf("model.layers.0.self_attn.o_proj"), "ignored by regex");
      assertNull(b.quantization().schemeOf("lm_head"), "ignored by name");
      assertEquals(DType.BF16, b.fp8("model.layers.0.self_attn.q_proj.weight").product());
      assertEquals(Granularity.CHANNEL, b.fp8("model.layers.0.self_attn.q_proj.weight").scheme().granularity());

      assertNotNull(c.quantization().schemeOf("lm_head"), "targeted by name in the second group");
      assertNull(c.quantization().schemeOf("model.layers.1.self_attn.v_proj"));
      assertNotNull(c.quantization().schemeOf("model.layers.0.self_attn.v_proj"));
      assertEquals(Activations.DYNAMIC_GROUP, c.quantization().schemeOf("model.layers.0.mlp.up_proj").activations());

      Fp8Weight lm = d.fp8("lm_head.weight");
      assertEquals(DType.F16, lm.product(), "compressed-tensors multiplies in the scale's dtype");
      assertEquals(Activations.STATIC_TENSOR, lm.scheme().activations());
      assertEquals("lm_head.input_scale", lm.inputScale().name());
      assertEquals(1, lm.scaleRows() * lm.scaleCols());
      assertEquals("model.layers.0.mlp.up_proj.activation_scale", e.fp8("model.layers.0.mlp.up_proj.weight").inputScale().name());
      assertEquals("compressed-tensors fp8 (weights block 128x128, activations dynamic per token x 128 columns)",
          c.quantization().describe());
    }
  }
}
