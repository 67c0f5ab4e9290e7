package io.longsieve.model;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.longsieve.cpu.CpuWeights;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A bad checkpoint is refused with a message naming the file and the field at fault. */
class BadCheckpointTest {

  @TempDir Path dir;

  private void load() {
    ModelConfig c = ModelConfig.read(dir);
    try (Checkpoint ck = Checkpoint.open(dir)) {
      CpuWeights.load(ck, c);
    }
  }

  private static void assertMessage(RuntimeException e, String... parts) {
    for (String p : parts) assertTrue(e.getMessage().contains(p), () -> "'" + p + "' not in: " + e.getMessage());
  }

  @Test
  void goodCheckpointLoads() throws IOException {
    TinyCheckpoint.write(dir, 1);
    load();
  }

  @Test
  void missingTensorIsNamed() throws IOException {
    Files.writeString(dir.resolve("config.json"), TinyCheckpoint.config());
    SafetensorsWriter w = TinyCheckpoint.weights(1);
    ObjectNode h = w.header();
    h.remove("model.layers.1.mlp.up_proj.weight");
    w.write(dir.resolve("model.safetensors"), h);
    var e = assertThrows(CheckpointException.class, this::load);
    assertMessage(e, "model.layers.1.mlp.up_proj.weight", "missing");
  }

  @Test
  void wrongShapeIsNamedWithBothShapes() throws IOException {
    Files.writeString(dir.resolve("config.json"), TinyCheckpoint.config().replace("\"intermediate_size\":64", "\"intermediate_size\":32"));
    TinyCheckpoint.weights(1).write(dir.resolve("model.safetensors"));
    var e = assertThrows(CheckpointException.class, this::load);
    assertMessage(e, "model.safetensors", "model.layers.0.mlp.gate_proj.weight", "[64, 32]", "[32, 32]");
  }

  @Test
  void headerLengthBeyondTheFileIsRefused() throws IOException {
    TinyCheckpoint.write(dir, 1);
    Path f = dir.resolve("model.safetensors");
    byte[] bytes = Files.readAllBytes(f);
    ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).putLong(0, bytes.length + 100L);
    Files.write(f, bytes);
    var e = assertThrows(CheckpointException.class, () -> Checkpoint.open(dir));
    assertMessage(e, "model.safetensors", "header length", "beyond the file");
  }

  @Test
  void offsetsOutOfRangeAreRefused() throws IOException {
    Files.writeString(dir.resolve("config.json"), TinyCheckpoint.config());
    SafetensorsWriter w = TinyCheckpoint.weights(1);
    ObjectNode h = w.header();
    var offs = (com.fasterxml.jackson.databind.node.ArrayNode) h.get("lm_head.weight").get("data_offsets");
    long start = offs.get(0).asLong();
    offs.removeAll();
    offs.add(start + 1_000_000);
    offs.add(start + 1_000_000 + 96 * 32 * 4);
    w.write(dir.resolve("model.safetensors"), h);
    var e = assertThrows(CheckpointException.class, () -> Checkpoint.open(dir));
    assertMessage(e, "lm_head.weight", "data_offsets", "out of range");
  }

  @Test
  void overlappingTensorsAreRefused() throws IOException {
    SafetensorsWriter w = new SafetensorsWriter().add("a", new float[8], 8).add("b", new float[8], 8);
    ObjectNode h = w.header();
    var offs = (com.fasterxml.jackson.databind.node.ArrayNode) h.get("b").get("data_offsets");
    offs.removeAll();
    offs.add(16);
    offs.add(48);
    w.write(dir.resolve("model.safetensors"), h);
    var e = assertThrows(CheckpointException.class, () -> Checkpoint.open(dir));
    assertMessage(e, "'a'", "'b'", "overlap");
  }

  @Test
  void sizeThatDisagreesWithShapeIsRefused() throws IOException {
    SafetensorsWriter w = new SafetensorsWriter().add("a", new float[8], 8);
    ObjectNode h = w.header();
    ((com.fasterxml.jackson.databind.node.ArrayNode) h.get("a").get("shape")).set(0, 9);
    w.write(dir.resolve("model.safetensors"), h);
    var e = assertThrows(CheckpointException.class, () -> Checkpoint.open(dir));
    assertMessage(e, "'a'", "needs 36");
  }

  @Test
  void unsupportedDtypeIsNamed() throws IOException {
    SafetensorsWriter w = new SafetensorsWriter().add("a", new float[8], 8);
    ObjectNode h = w.header();
    ((ObjectNode) h.get("a")).put("dtype", "I8");
    w.write(dir.resolve("model.safetensors"), h);
    var e = assertThrows(CheckpointException.class, () -> Checkpoint.open(dir));
    assertMessage(e, "model.safetensors", "'a'", "dtype 'I8' is not supported");
  }

  @Test
  void unknownArchitectureIsRefused() throws IOException {
    Files.writeString(dir.resolve("config.json"),
        TinyCheckpoint.config().replace("\"llama\"", "\"gpt2\"").replace("LlamaForCausalLM", "GPT2LMHeadModel"));
    var e = assertThrows(CheckpointException.class, () -> ModelConfig.read(dir));
    assertMessage(e, "config.json", "model_type 'gpt2'", "not supported");
  }

  @Test
  void missingConfigFieldIsNamed() throws IOException {
    Files.writeString(dir.resolve("config.json"), TinyCheckpoint.config().replace("\"num_hidden_layers\":2,", ""));
    var e = assertThrows(CheckpointException.class, () -> ModelConfig.read(dir));
    assertMessage(e, "config.json", "'num_hidden_layers'", "missing");
  }

  @Test
  void shardIndexPointingOutsideTheFolderIsRefused() throws IOException {
    Path model = Files.createDirectories(dir.resolve("model"));
    Files.writeString(model.resolve("config.json"), TinyCheckpoint.config());
    TinyCheckpoint.weights(1).write(dir.resolve("outside.safetensors"));
    Files.writeString(model.resolve("model.safetensors.index.json"),
        "{\"metadata\":{},\"weight_map\":{\"model.embed_tokens.weight\":\"../outside.safetensors\"}}");
    var e = assertThrows(CheckpointException.class, () -> Checkpoint.open(model));
    assertMessage(e, "model.safetensors.index.json", "model.embed_tokens.weight", "outside the model folder");
  }

  @Test
  void missingShardIsNamed() throws IOException {
    Files.writeString(dir.resolve("config.json"), TinyCheckpoint.config());
    Files.writeString(dir.resolve("model.safetensors.index.json"),
        "{\"weight_map\":{\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\"}}");
    var e = assertThrows(CheckpointException.class, () -> Checkpoint.open(dir));
    assertMessage(e, "model-00001-of-00002.safetensors", "does not exist");
  }

  @Test
  void emptyFolderSaysWhatIsMissing() {
    var e = assertThrows(CheckpointException.class, () -> Checkpoint.open(dir));
    assertMessage(e, "no model.safetensors");
  }
}
