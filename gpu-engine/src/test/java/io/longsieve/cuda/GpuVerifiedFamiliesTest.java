package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertNull;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.model.ModelConfig;
import java.nio.file.Path;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Which configs {@code --device auto} sends to the GPU (no GPU needed): every family the gpu suite verified. */
class GpuVerifiedFamiliesTest {

  private static final ObjectMapper JSON = new ObjectMapper();

  @ParameterizedTest
  @ValueSource(strings = {"llama-3.1-8b", "deepseek-r1-distill-qwen-7b", "mistral-nemo-12b", "qwen2.5-7b-yarn",
      "qwen3-8b-yarn", "phi-4-mini", "phi-3.5-mini", "gemma-3-12b-text"})
  void theFamiliesTheGpuSuiteRanAreVerified(String name) throws Exception {
    assertNull(GpuVerifiedFamilies.unverifiedReason(config(name)), name);
  }

  private static ModelConfig config(String name) throws Exception {
    return ModelConfig.parse(JSON.readTree(Path.of("src/test/resources/configs", name + ".json").toFile()), name);
  }
}
