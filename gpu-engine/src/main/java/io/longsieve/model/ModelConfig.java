package io.longsieve.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * The parts of a Hugging Face {@code config.json} that a Llama-family decoder needs. Reads both the
 * transformers 4.x spelling ({@code rope_scaling}, {@code torch_dtype}) and the 5.x one
 * ({@code rope_parameters}, {@code dtype}). Architectures other than Llama, Mistral and Qwen2 are
 * refused, because their math differs in ways this engine does not implement.
 */
public record ModelConfig(
    String modelType,          // llama | mistral | qwen2
    int hiddenSize,            // dim
    int intermediateSize,      // SwiGLU hidden size
    int numLayers,
    int numHeads,
    int numKvHeads,
    int headDim,
    int vocabSize,
    double rmsNormEps,
    double ropeTheta,
    RopeScaling ropeScaling,
    int maxPositions,
    boolean tieWordEmbeddings,
    boolean attentionBias,     // q/k/v projections carry a bias (Qwen2)
    int slidingWindow,         // 0: full attention
    int bosTokenId,            // -1: none
    List<Integer> eosTokenIds) implements Serializable {

  static final Set<String> SUPPORTED = Set.of("llama", "mistral", "qwen2");
  private static final ObjectMapper JSON = new ObjectMapper();

  public int kvDim() {
    return numKvHeads * headDim;
  }

  public int qDim() {
    return numHeads * headDim;
  }

  /** Query heads per KV head; query head h reads KV head h / group. */
  public int group() {
    return numHeads / numKvHeads;
  }

  /** Reads and validates {@code dir/config.json}. */
  public static ModelConfig read(Path dir) {
    Path file = dir.resolve("config.json");
    if (!Files.isRegularFile(file)) throw new CheckpointException(file + ": missing (no config.json in the model folder)");
    JsonNode root;
    try {
      root = JSON.readTree(file.toFile());
    } catch (IOException e) {
      throw new CheckpointException(file + ": not valid JSON: " + e.getMessage(), e);
    }
    return parse(root, file.toString());
  }

  static ModelConfig parse(JsonNode root, String where) {
    Fields f = new Fields(root, where);
    String type = f.text("model_type", "");
    String arch = root.path("architectures").path(0).asText("");
    if (!SUPPORTED.contains(type)) {
      throw new CheckpointException(where + ": model_type '" + type + "' (architectures " + root.path("architectures")
          + ") is not supported; supported: llama, mistral, qwen2");
    }
    if (!arch.isEmpty() && !arch.endsWith("ForCausalLM")) {
      throw new CheckpointException(where + ": architectures[0] '" + arch + "' is not a causal LM");
    }
    int hidden = f.positiveInt("hidden_size");
    int heads = f.positiveInt("num_attention_heads");
    int kvHeads = root.has("num_key_value_heads") && !root.get("num_key_value_heads").isNull()
        ? f.positiveInt("num_key_value_heads") : heads;
    if (heads % kvHeads != 0) {
      throw new CheckpointException(where + ": num_attention_heads " + heads + " is not a multiple of num_key_value_heads " + kvHeads);
    }
    int headDim = root.hasNonNull("head_dim") ? f.positiveInt("head_dim") : hidden / heads;
    if (headDim % 2 != 0) throw new CheckpointException(where + ": head_dim " + headDim + " must be even for RoPE");

    JsonNode rope = root.hasNonNull("rope_parameters") ? root.get("rope_parameters") : root.path("rope_scaling");
    double theta = root.hasNonNull("rope_theta") ? root.get("rope_theta").asDouble()
        : rope.path("rope_theta").asDouble(10000.0);
    RopeScaling scaling = parseRopeScaling(rope, where);

    boolean bias = type.equals("qwen2") || root.path("attention_bias").asBoolean(false);
    int window = 0;
    if (root.hasNonNull("sliding_window") && !(type.equals("qwen2") && !root.path("use_sliding_window").asBoolean(false))) {
      window = root.get("sliding_window").asInt(0);
    }
    return new ModelConfig(type, hidden, f.positiveInt("intermediate_size"), f.positiveInt("num_hidden_layers"),
        heads, kvHeads, headDim, f.positiveInt("vocab_size"), root.path("rms_norm_eps").asDouble(1e-6), theta, scaling,
        root.path("max_position_embeddings").asInt(4096), root.path("tie_word_embeddings").asBoolean(false), bias,
        window, root.path("bos_token_id").asInt(-1), idList(root.path("eos_token_id")));
  }

  private static RopeScaling parseRopeScaling(JsonNode rope, String where) {
    String type = rope.path("rope_type").asText(rope.path("type").asText("default"));
    switch (type) {
      case "default":
        return RopeScaling.NONE;
      case "llama3":
        return new RopeScaling("llama3", rope.path("factor").asDouble(8), rope.path("low_freq_factor").asDouble(1),
            rope.path("high_freq_factor").asDouble(4), rope.path("original_max_position_embeddings").asInt(8192));
      default:
        throw new CheckpointException(where + ": rope scaling type '" + type + "' is not supported (default, llama3)");
    }
  }

  static List<Integer> idList(JsonNode node) {
    List<Integer> ids = new ArrayList<>();
    if (node.isArray()) node.forEach(n -> ids.add(n.asInt()));
    else if (node.isInt()) ids.add(node.asInt());
    return List.copyOf(ids);
  }

  /** Field access that names the file and the field when a value is missing or wrong. */
  private record Fields(JsonNode root, String where) {
    int positiveInt(String name) {
      JsonNode n = root.get(name);
      if (n == null || n.isNull()) throw new CheckpointException(where + ": field '" + name + "' is missing");
      if (!n.canConvertToInt() || n.asInt() <= 0) {
        throw new CheckpointException(where + ": field '" + name + "' must be a positive integer, got " + n);
      }
      return n.asInt();
    }

    String text(String name, String dflt) {
      return root.path(name).asText(dflt);
    }
  }
}
