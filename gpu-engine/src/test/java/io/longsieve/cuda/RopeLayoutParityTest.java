package io.longsieve.cuda;

import static io.longsieve.cuda.Gpu.BF16_TOLERANCE;
import static io.longsieve.cuda.Gpu.assertClose;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The scaled and partial RoPE tables on the device: rope_rows with model/Rope's device table, on q
 * rows laid out by QkLayout (reordered for partial rotary, the attention factor multiplied in),
 * gives back, in transformers' element order, what the CPU's Rope gives (cos and sin times the
 * factor, pass-through elements untouched): Phi-4-mini's LongRoPE short and long tables with 96 of
 * 128 elements rotating, Qwen2.5's and Qwen3's YaRN, Gemma 3's linear global table; positions past
 * 100K.
 */
@Tag("gpu")
class RopeLayoutParityTest extends GpuTest {

  @ParameterizedTest(name = "{0} at {1}")
  @CsvSource({"phi-4-mini, 3000", "phi-4-mini, 120000", "qwen2.5-7b-yarn, 131000", "qwen3-8b-yarn, 100000",
      "gemma-3-12b-text, 130000"})
  void deviceTableRotatesAsTheCpu(String name, int pos0) throws Exception {
    ModelConfig c = ModelConfig.parse(new ObjectMapper().readTree(Path.of("src/test/resources/configs", name + ".json")
        .toFile()), name);
    int full = 0;
    while (c.window(full) > 0) full++;  // a full-attention layer (Gemma 3: the global table)
    int n = 5, heads = 4, d = c.headDim(), width = heads * d;
    Rope rope = Rope.forLayer(c, full).atLength(pos0 + n);
    QkLayout layout = new QkLayout(d, rope.rotaryDim(), rope.deviceDimOrder(), rope.attentionFactor());
    Random r = new Random(pos0);
    float[] q = Gpu.random(r, n * width, 1);
    float[] device = q.clone();
    for (int i = 0; i < n; i++) layout.rows(device, i * width, heads, 1, true);
    DeviceBuffer out = gpu.poisoned(n * width * 2L, true);
    gpu.k.rope(out.ptr(), gpu.f32(device).ptr(), width, n, heads, d, gpu.f32(rope.deviceInverseFrequencies()).ptr(), null,
        pos0);
    float[] got = gpu.readBf16(out, n * width), back = new float[got.length];
    int[] order = rope.deviceDimOrder();
    for (int row = 0; row < n * heads; row++) {
      for (int j = 0; j < d; j++) back[row * d + order[j]] = got[row * d + j];  // device element j is element order[j]
    }
    float[] ref = q.clone();
    for (int i = 0; i < n; i++) rope.rotate(ref, i * width, heads, pos0 + i);
    assertClose(back, ref, BF16_TOLERANCE, name + " at " + pos0);
  }
}
