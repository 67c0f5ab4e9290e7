package io.longsieve.engine.spi;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.longsieve.model.ChatTemplate;
import io.longsieve.model.CheckpointException;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.QuantizationConfig;
import io.longsieve.model.Tokenizer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * The text side of a checkpoint folder, shared by every backend: config, tokenizer, chat template
 * and the set of end-of-sequence ids (config.json ∪ generation_config.json ∪ the tokenizer's
 * eos_token).
 */
public record LoadedModel(Path dir, ModelConfig config, Tokenizer tokenizer, ChatTemplate chatTemplate,
                          Set<Integer> eosIds) implements AutoCloseable {

  public static LoadedModel load(Path dir) {
    if (!Files.isDirectory(dir)) throw new CheckpointException(dir + ": model folder does not exist");
    ModelConfig config = ModelConfig.read(dir);
    // refuses a quantization method the engine does not read (GPTQ, AWQ, bitsandbytes, ...) here, in one
    // line, before any backend opens; the checkpoint reads the config again when it opens (Checkpoint.open)
    QuantizationConfig.read(dir);
    ChatTemplate template = ChatTemplate.load(dir);
    Tokenizer tokenizer = Tokenizer.load(dir);
    Set<Integer> eos = new LinkedHashSet<>(config.eosTokenIds());
    Path gen = dir.resolve("generation_config.json");
    if (Files.isRegularFile(gen)) {
      try {
        JsonNode root = new ObjectMapper().readTree(gen.toFile());
        JsonNode e = root.path("eos_token_id");
        if (e.isArray()) e.forEach(n -> eos.add(n.asInt()));
        else if (e.isInt()) eos.add(e.asInt());
      } catch (IOException ex) {
        throw new CheckpointException(gen + ": not valid JSON: " + ex.getMessage(), ex);
      }
    }
    if (!template.eosToken().isEmpty()) {
      int[] ids = tokenizer.encode(template.eosToken(), false);
      if (ids.length == 1) eos.add(ids[0]);
    }
    return new LoadedModel(dir, config, tokenizer, template, Set.copyOf(eos));
  }

  @Override
  public void close() {
    tokenizer.close();
  }
}
