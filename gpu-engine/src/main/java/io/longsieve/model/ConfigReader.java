package io.longsieve.model;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;

/**
 * config.json → {@link ModelConfig}, family by family, with the defaults each transformers config
 * class (transformers 5.18: models/&lt;family&gt;/configuration_*.py) fills in for a field config.json
 * leaves out, so a checkpoint saved with only the fields that differ reads as transformers reads it.
 * Every refusal names the file and the field in one line.
 */
final class ConfigReader {

  static final List<String> SUPPORTED = List.of("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma3_text");

  private final JsonNode root;
  private final String where;

  ConfigReader(JsonNode root, String where) {
    this.root = root;
    this.where = where;
  }

  ModelConfig read() {
    String type = root.path("model_type").asText("");
    String arch = root.path("architectures").path(0).asText("");
    if (type.equals("gemma3") && root.has("text_config")) {
      throw refuse("model_type 'gemma3' (" + arch + ") is the multimodal Gemma 3; the engine runs the text model "
          + "Gemma3ForCausalLM (model_type gemma3_text)");
    }
    if (!SUPPORTED.contains(type)) {
      throw refuse("model_type '" + type + "' (architectures " + root.path("architectures") + ") is not supported; supported: "
          + String.join(", ", SUPPORTED));
    }
    if (!arch.isEmpty() && !arch.endsWith("ForCausalLM")) throw refuse("architectures[0] '" + arch + "' is not a causal LM");
    boolean gemma = type.equals("gemma3_text");
    int hidden = positiveInt("hidden_size");
    int heads = positiveInt("num_attention_heads");
    int kvHeads = root.hasNonNull("num_key_value_heads") ? positiveInt("num_key_value_heads") : heads;
    if (heads % kvHeads != 0) {
      throw refuse("num_attention_heads " + heads + " is not a multiple of num_key_value_heads " + kvHeads);
    }
    int headDim = root.hasNonNull("head_dim") ? positiveInt("head_dim")
        : gemma ? 256 : type.equals("qwen3") ? 128 : hidden / heads;  // the config classes' defaults
    if (headDim % 2 != 0) throw refuse("head_dim " + headDim + " must be even for RoPE");
    int layers = positiveInt("num_hidden_layers");
    int maxPositions = root.hasNonNull("max_position_embeddings") ? positiveInt("max_position_embeddings")
        : switch (type) {
          case "llama" -> 2048;
          case "mistral", "gemma3_text" -> 131072;
          case "phi3" -> 4096;
          default -> 32768;
        };
    checkActivation(type);
    boolean bias;
    if (type.equals("qwen2")) {
      bias = true;
    } else if (type.equals("qwen3") || gemma) {
      if (root.path("attention_bias").asBoolean(false)) throw refuse("attention_bias true (a bias on o_proj too) is not supported");
      bias = false;
    } else {
      bias = !type.equals("phi3") && root.path("attention_bias").asBoolean(false);
    }
    if (gemma && root.path("use_bidirectional_attention").asBoolean(false)) {
      throw refuse("use_bidirectional_attention true is an encoder setting, not a causal LM");
    }

    RopeReader rope = new RopeReader(root, where, type, maxPositions);
    int rotaryDim = rope.rotaryDim(headDim);
    List<LayerKind> kinds = layerKinds(type, layers, rope, rotaryDim);
    LayerKind full = kinds.stream().filter(k -> !k.sliding()).findFirst().orElse(null);
    LayerKind globalRope = full != null ? full : rope.kind(false, 0, rotaryDim);
    int window = kinds.stream().mapToInt(LayerKind::window).max().orElse(0);

    FamilyTraits traits = FamilyTraits.llama(headDim);
    if (type.equals("qwen3")) traits = new FamilyTraits(true, false, false, false, 1, 1 / Math.sqrt(headDim), 0, false);
    if (type.equals("phi3")) traits = new FamilyTraits(false, false, false, false, 1, 1 / Math.sqrt(headDim), 0, true);
    if (gemma) {
      // attn_logit_softcapping is not read: transformers 5.18's Gemma3Attention never applies it (it passes
      // no softcap to the attention function), and the Gemma 3 checkpoints leave it null
      double scalar = root.hasNonNull("query_pre_attn_scalar") ? root.get("query_pre_attn_scalar").asDouble() : 256;
      if (!(scalar > 0)) throw refuse("field 'query_pre_attn_scalar' must be positive, got " + scalar);
      double cap = root.hasNonNull("final_logit_softcapping") ? root.get("final_logit_softcapping").asDouble() : 0;
      if (cap < 0) throw refuse("field 'final_logit_softcapping' must be positive, got " + cap);
      traits = new FamilyTraits(true, true, true, true, Math.sqrt(hidden), 1 / Math.sqrt(scalar), cap, false);
    }
    double eps = root.hasNonNull("rms_norm_eps") ? root.get("rms_norm_eps").asDouble() : type.equals("phi3") ? 1e-5 : 1e-6;
    boolean tied = root.path("tie_word_embeddings").asBoolean(gemma);  // Gemma 3 ties by default
    return new ModelConfig(type, hidden, positiveInt("intermediate_size"), layers, heads, kvHeads, headDim,
        positiveInt("vocab_size"), eps, globalRope.ropeTheta(), globalRope.ropeScaling(), maxPositions, tied, bias, window,
        root.path("bos_token_id").asInt(-1), ModelConfig.idList(root.path("eos_token_id")), rotaryDim, kinds, traits);
  }

  /** The MLP activation each family implements: SiLU (SwiGLU), or tanh-approximated GELU for Gemma 3. */
  private void checkActivation(String type) {
    if (type.equals("gemma3_text")) {
      String act = root.path("hidden_activation").asText("gelu_pytorch_tanh");
      if (!act.equals("gelu_pytorch_tanh")) throw refuse("hidden_activation '" + act + "' is not supported (gelu_pytorch_tanh)");
      return;
    }
    String act = root.path("hidden_act").asText("silu");
    if (!act.equals("silu")) throw refuse("hidden_act '" + act + "' is not supported (silu)");
  }

  /**
   * Each layer's window and RoPE, as the family's transformers model builds its masks: Mistral and
   * Phi-3 slide every layer when sliding_window is set (Mistral's default is 4096 when the key is
   * absent); Qwen2/Qwen3 follow layer_types, or slide from max_window_layers on when
   * use_sliding_window is true; Gemma 3 follows layer_types or its sliding_window_pattern (every
   * pattern-th layer global). Llama has no window. A window at least max_position_embeddings long
   * cannot bind and counts as full attention (Phi-3.5's 262144): at least the context length.
   */
  private List<LayerKind> layerKinds(String type, int layers, RopeReader rope, int rotaryDim) {
    List<Boolean> sliding = new ArrayList<>();
    int window = 0;
    switch (type) {
      case "mistral", "phi3" -> {
        window = root.has("sliding_window") ? root.path("sliding_window").asInt(0) : type.equals("mistral") ? 4096 : 0;
        for (int i = 0; i < layers; i++) sliding.add(true);
      }
      case "qwen2", "qwen3" -> {
        window = root.path("use_sliding_window").asBoolean(false) ? root.path("sliding_window").asInt(4096) : 0;
        int from = root.path("max_window_layers").asInt(28);
        List<Boolean> typed = layerTypes(layers);
        for (int i = 0; i < layers; i++) sliding.add(typed != null ? typed.get(i) : i >= from);
      }
      case "gemma3_text" -> {
        window = root.path("sliding_window").asInt(4096);
        int pattern = root.path("sliding_window_pattern").asInt(6);
        if (pattern <= 0) throw refuse("field 'sliding_window_pattern' must be positive, got " + pattern);
        List<Boolean> typed = layerTypes(layers);
        for (int i = 0; i < layers; i++) sliding.add(typed != null ? typed.get(i) : (i + 1) % pattern != 0);
      }
      default -> {
        for (int i = 0; i < layers; i++) sliding.add(false);
      }
    }
    if (window < 0) throw refuse("field 'sliding_window' must not be negative, got " + window);
    if (window >= rope.contextLength()) window = 0;
    List<LayerKind> kinds = new ArrayList<>();
    LayerKind full = rope.kind(false, 0, rotaryDim);
    LayerKind local = window > 0 ? rope.kind(true, window, rotaryDim) : full;
    for (int i = 0; i < layers; i++) kinds.add(sliding.get(i) ? local : full);
    return kinds;
  }

  /** layer_types as sliding (true) or full (false) per layer, or null when config.json has none. */
  private List<Boolean> layerTypes(int layers) {
    JsonNode types = root.path("layer_types");
    if (!types.isArray()) return null;
    if (types.size() != layers) throw refuse("layer_types has " + types.size() + " entries for " + layers + " layers");
    List<Boolean> out = new ArrayList<>();
    for (JsonNode t : types) {
      switch (t.asText()) {
        case "full_attention" -> out.add(false);
        case "sliding_attention" -> out.add(true);
        default -> throw refuse("layer_types entry '" + t.asText() + "' is not supported (full_attention, sliding_attention)");
      }
    }
    return out;
  }

  private int positiveInt(String name) {
    JsonNode n = root.get(name);
    if (n == null || n.isNull()) throw refuse("field '" + name + "' is missing");
    if (!n.canConvertToInt() || n.asInt() <= 0) throw refuse("field '" + name + "' must be a positive integer, got " + n);
    return n.asInt();
  }

  private CheckpointException refuse(String what) {
    return new CheckpointException(where + ": " + what);
  }
}
