package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import org.junit.jupiter.api.Test;

class ModelConfigTest {

  private static ModelConfig parse(String json) throws Exception {
    return ModelConfig.parse(new ObjectMapper().readTree(json), "config.json");
  }

  @Test
  void llama31WithRopeScalingAndEosList() throws Exception {
    ModelConfig c = parse("{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":4096,"
        + "\"intermediate_size\":14336,\"num_hidden_layers\":32,\"num_attention_heads\":32,\"num_key_value_heads\":8,"
        + "\"vocab_size\":128256,\"rms_norm_eps\":1e-5,\"rope_theta\":500000.0,\"max_position_embeddings\":131072,"
        + "\"rope_scaling\":{\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
        + "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"},\"bos_token_id\":128000,"
        + "\"eos_token_id\":[128001,128008,128009],\"tie_word_embeddings\":false}");
    assertEquals(128, c.headDim());
    assertEquals(4, c.group());
    assertEquals(1024, c.kvDim());
    assertTrue(c.ropeScaling().isLlama3());
    assertEquals(8192, c.ropeScaling().originalMaxPositions());
    assertEquals(List.of(128001, 128008, 128009), c.eosTokenIds());
    assertFalse(c.attentionBias());
  }

  @Test
  void transformers5RopeParametersSpelling() throws Exception {
    ModelConfig c = parse("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,"
        + "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":100,"
        + "\"rope_parameters\":{\"rope_theta\":500000.0,\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
        + "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":256}}");
    assertEquals(500000.0, c.ropeTheta());
    assertTrue(c.ropeScaling().isLlama3());
  }

  @Test
  void qwen2HasBiasAndIgnoresUnusedSlidingWindow() throws Exception {
    ModelConfig c = parse("{\"model_type\":\"qwen2\",\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,"
        + "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":100,\"sliding_window\":4096,"
        + "\"use_sliding_window\":false,\"tie_word_embeddings\":true,\"eos_token_id\":7}");
    assertTrue(c.attentionBias());
    assertEquals(0, c.slidingWindow());
    assertTrue(c.tieWordEmbeddings());
    assertEquals(List.of(7), c.eosTokenIds());
  }

  @Test
  void mistralSlidingWindowIsKept() throws Exception {
    ModelConfig c = parse("{\"model_type\":\"mistral\",\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,"
        + "\"num_attention_heads\":4,\"num_key_value_heads\":1,\"vocab_size\":100,\"sliding_window\":4096,\"head_dim\":32}");
    assertEquals(4096, c.slidingWindow());
    assertEquals(32, c.headDim());
  }

  @Test
  void unsupportedRopeTypeIsRefused() {
    var e = assertThrows(CheckpointException.class, () -> parse("{\"model_type\":\"llama\",\"hidden_size\":64,"
        + "\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,"
        + "\"rope_scaling\":{\"rope_type\":\"mrope\",\"factor\":4}}"));
    assertTrue(e.getMessage().contains("mrope"));
  }

  @Test
  void headsMustDivide() {
    var e = assertThrows(CheckpointException.class, () -> parse("{\"model_type\":\"llama\",\"hidden_size\":60,"
        + "\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":6,\"num_key_value_heads\":4,\"vocab_size\":100}"));
    assertTrue(e.getMessage().contains("num_key_value_heads"));
  }
}
