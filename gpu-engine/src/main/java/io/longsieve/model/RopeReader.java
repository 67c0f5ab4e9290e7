package io.longsieve.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.util.ArrayList;
import java.util.List;

/**
 * The RoPE part of config.json, read as transformers 5.18's RotaryEmbeddingConfigMixin
 * standardises it: {@code rope_parameters} (5.x; nested by layer type for Gemma 3) or
 * {@code rope_scaling} + {@code rope_theta} (4.x; Gemma 3's local base in
 * {@code rope_local_base_freq}), {@code partial_rotary_factor} inside the dict or beside it, and a
 * top-level {@code original_max_position_embeddings} taking priority over the dict's (Phi-3 always
 * has one: 4096 by default). Phi-3's older type names {@code su} and {@code yarn} mean longrope there.
 */
final class RopeReader {

  private static final JsonNode EMPTY = JsonNodeFactory.instance.objectNode();

  private final JsonNode root;
  private final String where;
  private final String modelType;
  private final int maxPositions;
  private final JsonNode full;     // the full-attention layers' dict
  private final JsonNode sliding;  // the sliding layers' (Gemma 3), else the same as full
  private final boolean nested;    // rope_parameters per layer type
  private RopeScaling fullScaling;

  RopeReader(JsonNode root, String where, String modelType, int maxPositions) {
    this.root = root;
    this.where = where;
    this.modelType = modelType;
    this.maxPositions = maxPositions;
    JsonNode rp = root.hasNonNull("rope_parameters") ? root.get("rope_parameters") : root.path("rope_scaling");
    if (!rp.isObject()) rp = EMPTY;
    nested = rp.has("full_attention") || rp.has("sliding_attention");
    if (nested) {
      full = rp.path("full_attention").isObject() ? rp.get("full_attention") : EMPTY;
      sliding = rp.path("sliding_attention").isObject() ? rp.get("sliding_attention") : EMPTY;
    } else {
      full = rp;
      sliding = modelType.equals("gemma3_text") ? EMPTY : rp;  // Gemma 3's rope_scaling is the global layers' only
    }
  }

  int maxPositions() {
    return maxPositions;
  }

  /** The default context length under the full-attention layers' scaling ({@link ModelConfig#contextLength}). */
  int contextLength() {
    return ModelConfig.contextLength(maxPositions, fullScaling());
  }

  private RopeScaling fullScaling() {
    if (fullScaling == null) fullScaling = scaling(full);
    return fullScaling;
  }

  /** int(headDim × partial_rotary_factor), as transformers sizes the rotated part. */
  int rotaryDim(int headDim) {
    JsonNode f = full.hasNonNull("partial_rotary_factor") ? full.get("partial_rotary_factor") : root.path("partial_rotary_factor");
    double factor = f.isNumber() ? f.asDouble() : 1.0;
    int dim = (int) (headDim * factor);
    if (!(factor > 0 && factor <= 1) || dim < 2 || dim % 2 != 0) {
      throw refuse("partial_rotary_factor " + factor + " gives " + dim + " rotated elements of head_dim " + headDim
          + "; the engine needs an even number in [2, head_dim]");
    }
    return dim;
  }

  /** The layer kind of a full-attention (sliding false) or sliding-window layer. */
  LayerKind kind(boolean slidingLayer, int window, int rotaryDim) {
    JsonNode dict = slidingLayer ? sliding : full;
    RopeScaling s = slidingLayer ? scaling(dict) : fullScaling();
    checkFactorLists(s, rotaryDim);
    return new LayerKind(window, theta(dict, slidingLayer), s);
  }

  /** The base: the dict's rope_theta, else config.json's rope_theta (or Gemma 3's rope_local_base_freq), else the family default. */
  private double theta(JsonNode dict, boolean slidingLayer) {
    if (dict.hasNonNull("rope_theta")) return dict.get("rope_theta").asDouble();
    boolean gemma = modelType.equals("gemma3_text");
    if (gemma && slidingLayer) return root.path("rope_local_base_freq").asDouble(10000.0);
    return root.path("rope_theta").asDouble(gemma ? 1_000_000.0 : 10000.0);
  }

  private RopeScaling scaling(JsonNode d) {
    String type = d.path("rope_type").asText(d.path("type").asText("default"));
    if (modelType.equals("phi3") && (type.equals("su") || type.equals("yarn"))) type = "longrope";  // Phi3Config's renaming
    if (modelType.equals("phi3") && !type.equals("default") && !type.equals("longrope")) {
      throw refuse("rope scaling type '" + type + "' is not one Phi-3 takes (default, longrope)");
    }
    switch (type) {
      case "default":
        return RopeScaling.NONE;
      case "linear":
      case "dynamic":
        return RopeScaling.of(type, factor(d, type));
      case "llama3":
        return new RopeScaling("llama3", d.path("factor").asDouble(8), d.path("low_freq_factor").asDouble(1),
            d.path("high_freq_factor").asDouble(4), original(d));
      case "yarn":
        return yarn(d);
      case "longrope":
        return longrope(d);
      default:
        throw refuse("rope scaling type '" + type + "' is not supported (default, linear, dynamic, yarn, longrope, llama3)");
    }
  }

  private double factor(JsonNode d, String type) {
    if (!d.path("factor").isNumber() || !(d.get("factor").asDouble() > 0)) {
      throw refuse("rope scaling '" + type + "' needs a positive 'factor', got " + d.path("factor"));
    }
    return d.get("factor").asDouble();
  }

  /**
   * original_max_position_embeddings: config.json's top-level field first (Phi-3 always has one, 4096
   * by default), then the dict's, then max_position_embeddings (standardize_rope_params). The
   * per-layer-type dicts take no top-level value.
   */
  private int original(JsonNode d) {
    if (!nested && root.hasNonNull("original_max_position_embeddings")) return root.get("original_max_position_embeddings").asInt();
    if (!nested && modelType.equals("phi3")) return 4096;
    int n = d.path("original_max_position_embeddings").asInt(maxPositions);
    if (n <= 0) throw refuse("original_max_position_embeddings must be positive, got " + n);
    return n;
  }

  /**
   * YaRN (_compute_yarn_parameters): the configured factor (only when absent the ratio
   * max_position_embeddings / original; transformers once took that ratio over an explicit factor,
   * and warns now when the two disagree, as Qwen3's 40960 / 32768 with factor 4 do, then uses the
   * factor); attention factor 0.1·ln(factor) + 1, or the mscale / mscale_all_dim ratio when both
   * are given, unless attention_factor is set; beta_fast 32 and beta_slow 1 when unset or 0.
   */
  private RopeScaling yarn(JsonNode d) {
    int original = original(d);
    double factor = d.hasNonNull("factor") ? factor(d, "yarn") : (double) maxPositions / original;
    double attention;
    if (d.hasNonNull("attention_factor")) {
      attention = d.get("attention_factor").asDouble();
    } else {
      double mscale = d.path("mscale").asDouble(0), mscaleAll = d.path("mscale_all_dim").asDouble(0);
      attention = mscale != 0 && mscaleAll != 0 ? yarnMscale(factor, mscale) / yarnMscale(factor, mscaleAll)
          : yarnMscale(factor, 1);
    }
    double fast = d.path("beta_fast").asDouble(0), slow = d.path("beta_slow").asDouble(0);
    return new RopeScaling("yarn", factor, 1, 1, original, attention, fast != 0 ? fast : 32, slow != 0 ? slow : 1,
        d.path("truncate").asBoolean(true), List.of(), List.of());
  }

  private static double yarnMscale(double scale, double mscale) {
    return scale <= 1 ? 1.0 : 0.1 * mscale * Math.log(scale) + 1.0;
  }

  /**
   * LongRoPE (_compute_longrope_parameters): factor max_position_embeddings / original unless given;
   * attention factor √(1 + ln(factor) / ln(original)) (1 when factor ≤ 1) unless given.
   */
  private RopeScaling longrope(JsonNode d) {
    int original = original(d);
    double factor = d.hasNonNull("factor") ? factor(d, "longrope") : (double) maxPositions / original;
    double attention = d.hasNonNull("attention_factor") ? d.get("attention_factor").asDouble()
        : factor <= 1 ? 1.0 : Math.sqrt(1 + Math.log(factor) / Math.log(original));
    return new RopeScaling("longrope", factor, 1, 1, original, attention, 32, 1, true, numbers(d, "short_factor"),
        numbers(d, "long_factor"));
  }

  private List<Double> numbers(JsonNode d, String name) {
    JsonNode a = d.path(name);
    if (!a.isArray() || a.isEmpty()) throw refuse("rope scaling 'longrope' needs the list '" + name + "'");
    List<Double> out = new ArrayList<>();
    for (JsonNode n : a) {
      if (!n.isNumber() || !(n.asDouble() > 0)) throw refuse("'" + name + "' holds " + n + ", not a positive number");
      out.add(n.asDouble());
    }
    return out;
  }

  private void checkFactorLists(RopeScaling s, int rotaryDim) {
    if (!s.type().equals("longrope")) return;
    if (s.shortFactor().size() != rotaryDim / 2 || s.longFactor().size() != rotaryDim / 2) {
      throw refuse("longrope short_factor and long_factor have " + s.shortFactor().size() + " and " + s.longFactor().size()
          + " entries; the rotated part of a head needs " + rotaryDim / 2);
    }
  }

  private CheckpointException refuse(String what) {
    return new CheckpointException(where + ": " + what);
  }
}
