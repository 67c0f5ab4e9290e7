package io.longsieve.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * The {@code quantization_config} of config.json, for the two FP8 checkpoint formats the engine
 * reads, and a one-line refusal of every other quantization method.
 *
 * <ul>
 *   <li>transformers {@code fp8} (FineGrainedFP8Config): {@code weight_block_size} [bn, bk] (or null:
 *       one scale per tensor), fp32 {@code weight_scale_inv} beside each weight (multiplied, despite
 *       its name), {@code activation_scheme} dynamic (activations quantized per token and bk-column
 *       group, DeepSeek-V3's scheme; per token without blocks) or static ({@code activation_scale}),
 *       {@code modules_to_not_convert} matched as transformers' should_convert_module does.
 *   <li>compressed-tensors with 8-bit float weights ({@code format} float-quantized or naive-quantized):
 *       {@code config_groups} of {@code targets} (module names, {@code re:} regexes matched from the
 *       start, or the class {@code Linear}) minus {@code ignore}; weights strategy tensor, channel or
 *       block ({@code block_structure}), {@code weight_scale} in the dtype of the original weights
 *       (the product is rounded to it, as compressed-tensors' dequantize does); input activations
 *       none (weight-only), dynamic per token / tensor / group, or static per tensor
 *       ({@code input_scale}). A {@code kv_cache_scheme} is read past: the KV cache stays bf16.
 * </ul>
 * Which weights are FP8 is what the tensors say (a weight stored F8_E4M3 with its scale); the config
 * says how to read them, and a weight it keeps in high precision must not be stored F8_E4M3.
 */
public final class QuantizationConfig {

  public enum Format { NONE, FP8, COMPRESSED_TENSORS }

  /** How many weight elements share one scale. */
  public enum Granularity { TENSOR, CHANNEL, BLOCK }

  /** How the checkpoint quantizes a layer's input on an FP8 GEMM (the CPU reference does not). */
  public enum Activations {
    WEIGHT_ONLY,     // none in the checkpoint (W8A16)
    DYNAMIC_TOKEN,   // one scale per token (row), computed at run time
    DYNAMIC_TENSOR,  // one scale per call, computed at run time
    DYNAMIC_GROUP,   // one scale per token and group of activationGroup columns (1 x 128 for 128 x 128 weight blocks)
    STATIC_TENSOR    // one scale per layer, stored in the checkpoint
  }

  /**
   * How one module's weight is quantized.
   *
   * @param blockRows output rows per scale (BLOCK only; 0 otherwise)
   * @param blockCols input columns per scale (BLOCK only; 0 otherwise)
   * @param activationGroup columns per activation scale (DYNAMIC_GROUP only; 0 otherwise)
   */
  public record Scheme(Granularity granularity, int blockRows, int blockCols, Activations activations,
                       int activationGroup) {
    @Override
    public String toString() {
      String w = granularity == Granularity.BLOCK ? "block " + blockRows + "x" + blockCols
          : granularity.name().toLowerCase(Locale.ROOT);
      String a = activations == Activations.DYNAMIC_GROUP ? "dynamic per token x " + activationGroup + " columns"
          : activations.name().toLowerCase(Locale.ROOT).replace('_', ' ');
      return "weights " + w + ", activations " + a;
    }
  }

  private record Group(List<String> targets, Scheme scheme) {}

  public static final QuantizationConfig NONE = new QuantizationConfig(Format.NONE, List.of(), List.of(), "");

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final List<String> CT_FLOAT_FORMATS = List.of("float-quantized", "naive-quantized");

  private final Format format;
  private final List<Group> groups;
  private final List<String> keepHighPrecision;  // compressed-tensors ignore / fp8 modules_to_not_convert
  private final String where;

  private QuantizationConfig(Format format, List<Group> groups, List<String> keepHighPrecision, String where) {
    this.format = format;
    this.groups = groups;
    this.keepHighPrecision = keepHighPrecision;
    this.where = where;
  }

  /** Reads {@code dir/config.json}'s quantization_config; NONE when there is no config.json or no such field. */
  public static QuantizationConfig read(Path dir) {
    Path file = dir.resolve("config.json");
    if (!Files.isRegularFile(file)) return NONE;
    JsonNode root;
    try {
      root = JSON.readTree(file.toFile());
    } catch (IOException e) {
      throw new CheckpointException(file + ": not valid JSON: " + e.getMessage(), e);
    }
    return parse(root, file.toString());
  }

  static QuantizationConfig parse(JsonNode root, String file) {
    JsonNode q = root.path("quantization_config");
    if (q.isMissingNode() || q.isNull()) return NONE;
    String where = file + ": quantization_config";
    if (!q.isObject()) throw new CheckpointException(where + " is not an object");
    String method = q.path("quant_method").asText("");
    if (method.isEmpty() && (q.has("load_in_4bit") || q.has("load_in_8bit"))) method = "bitsandbytes";
    switch (method) {
      case "fp8":
        return parseFp8(q, where);
      case "compressed-tensors":
        return parseCompressedTensors(q, where);
      case "":
        throw new CheckpointException(where + " has no quant_method");
      default:
        throw new CheckpointException(where + ": quant_method '" + method + "' is not supported; the engine reads"
            + " bf16/f16/f32 checkpoints and FP8 ones (quant_method fp8, or compressed-tensors with 8-bit float weights)");
    }
  }

  private static QuantizationConfig parseFp8(JsonNode q, String where) {
    String scaleFmt = q.path("scale_fmt").asText("float");
    if (!scaleFmt.equals("float")) {
      throw new CheckpointException(where + ": fp8 scale_fmt '" + scaleFmt + "' is not supported (float)");
    }
    if (q.path("modules_to_convert").size() > 0) {
      throw new CheckpointException(where + ": fp8 modules_to_convert " + q.get("modules_to_convert")
          + " (FP8 embeddings) is not supported; only linear layers may be FP8");
    }
    String act = q.path("activation_scheme").asText("dynamic").toLowerCase(Locale.ROOT);
    JsonNode block = q.path("weight_block_size");
    Scheme scheme;
    if (block.isMissingNode() || block.isNull()) {
      scheme = new Scheme(Granularity.TENSOR, 0, 0, staticOr(act, Activations.DYNAMIC_TOKEN, where), 0);
    } else {
      int[] b = positivePair(block, where + ".weight_block_size");
      scheme = new Scheme(Granularity.BLOCK, b[0], b[1], staticOr(act, Activations.DYNAMIC_GROUP, where),
          act.equals("dynamic") ? b[1] : 0);
    }
    JsonNode skip = q.hasNonNull("modules_to_not_convert") ? q.get("modules_to_not_convert") : q.path("ignored_layers");
    List<String> keep = strings(skip, where + ".modules_to_not_convert");
    for (String k : keep) compile(k, where + ".modules_to_not_convert");
    return new QuantizationConfig(Format.FP8, List.of(new Group(List.of("Linear"), scheme)), keep, where);
  }

  private static Activations staticOr(String act, Activations dynamic, String where) {
    switch (act) {
      case "dynamic": return dynamic;
      case "static": return Activations.STATIC_TENSOR;
      default: throw new CheckpointException(where + ": activation_scheme '" + act + "' is not supported (dynamic, static)");
    }
  }

  private static QuantizationConfig parseCompressedTensors(JsonNode q, String where) {
    String format = q.path("format").asText("dense");
    JsonNode sparsity = q.path("sparsity_config");
    if (sparsity.isObject() && sparsity.size() > 0 && !sparsity.path("format").asText("dense").equals("dense")) {
      throw new CheckpointException(where + ": compressed-tensors sparsity_config (format '"
          + sparsity.path("format").asText() + "') is not supported");
    }
    if (q.hasNonNull("transform_config")) {
      throw new CheckpointException(where + ": compressed-tensors transform_config (rotations) is not supported");
    }
    JsonNode cg = q.path("config_groups");
    if (!cg.isObject() || cg.isEmpty()) throw new CheckpointException(where + ": compressed-tensors needs config_groups");
    List<Group> groups = new ArrayList<>();
    for (var it = cg.fields(); it.hasNext(); ) {
      var e = it.next();
      String gw = where + ".config_groups." + e.getKey();
      JsonNode g = e.getValue();
      String gFormat = g.path("format").asText(format);
      if (!CT_FLOAT_FORMATS.contains(gFormat)) {
        throw new CheckpointException(gw + ": compressed-tensors format '" + gFormat + "' is not supported; the engine"
            + " reads 8-bit float weights (float-quantized, naive-quantized)");
      }
      List<String> targets = strings(g.path("targets"), gw + ".targets");
      if (targets.isEmpty()) throw new CheckpointException(gw + ": targets is empty");
      for (String t : targets) compileTarget(t, gw + ".targets");
      if (g.hasNonNull("output_activations")) throw new CheckpointException(gw + ": output_activations are not supported");
      Scheme s = ctScheme(g.path("weights"), g.path("input_activations"), gw);
      groups.add(new Group(targets, s));
    }
    List<String> ignore = strings(q.path("ignore"), where + ".ignore");
    for (String i : ignore) compileTarget(i, where + ".ignore");
    return new QuantizationConfig(Format.COMPRESSED_TENSORS, List.copyOf(groups), ignore, where);
  }

  private static Scheme ctScheme(JsonNode w, JsonNode in, String gw) {
    if (!w.isObject()) throw new CheckpointException(gw + ": weights is missing (activation-only quantization is not supported)");
    String type = w.path("type").asText("int");
    int bits = w.path("num_bits").asInt(8);
    if (!type.equals("float") || bits != 8) {
      throw new CheckpointException(gw + ": compressed-tensors " + type + bits + " weights are not supported; the engine"
          + " reads 8-bit float (FP8) weights");
    }
    if (!w.path("symmetric").asBoolean(true)) throw new CheckpointException(gw + ": asymmetric weights (zero points) are not supported");
    if (!isFalse(w.path("dynamic"))) throw new CheckpointException(gw + ": dynamic weight scales are not supported");
    if (!isFalse(w.path("actorder"))) throw new CheckpointException(gw + ": weights actorder is not supported");
    String strategy = w.path("strategy").asText("tensor");
    Granularity gran;
    int br = 0, bc = 0;
    switch (strategy) {
      case "tensor": gran = Granularity.TENSOR; break;
      case "channel": gran = Granularity.CHANNEL; break;
      case "block": {
        int[] b = positivePair(w.path("block_structure"), gw + ".weights.block_structure");
        gran = Granularity.BLOCK;
        br = b[0];
        bc = b[1];
        break;
      }
      default:
        throw new CheckpointException(gw + ": weights strategy '" + strategy + "' is not supported (tensor, channel, block)");
    }
    Activations act;
    int group = 0;
    if (in.isMissingNode() || in.isNull()) {
      act = Activations.WEIGHT_ONLY;
    } else {
      if (!in.path("type").asText("int").equals("float") || in.path("num_bits").asInt(8) != 8) {
        throw new CheckpointException(gw + ": input_activations " + in.path("type").asText("int") + in.path("num_bits").asInt(8)
            + " are not supported (8-bit float)");
      }
      JsonNode dyn = in.path("dynamic");
      if (!dyn.isBoolean()) throw new CheckpointException(gw + ": input_activations dynamic '" + dyn.asText() + "' is not supported (true, false)");
      String as = in.path("strategy").asText("tensor");
      boolean dynamic = dyn.asBoolean();
      if (as.equals("token") && dynamic) act = Activations.DYNAMIC_TOKEN;
      else if (as.equals("tensor")) act = dynamic ? Activations.DYNAMIC_TENSOR : Activations.STATIC_TENSOR;
      else if (as.equals("group") && dynamic && in.path("group_size").asInt(0) > 0) {
        act = Activations.DYNAMIC_GROUP;
        group = in.get("group_size").asInt();
      } else {
        throw new CheckpointException(gw + ": input_activations strategy '" + as + "' with dynamic " + dynamic
            + " is not supported (dynamic token, tensor or group; static tensor)");
      }
    }
    return new Scheme(gran, br, bc, act, group);
  }

  private static boolean isFalse(JsonNode n) {
    return n.isMissingNode() || n.isNull() || (n.isBoolean() && !n.asBoolean());
  }

  private static int[] positivePair(JsonNode n, String where) {
    if (!n.isArray() || n.size() != 2 || !n.get(0).canConvertToInt() || !n.get(1).canConvertToInt()
        || n.get(0).asInt() <= 0 || n.get(1).asInt() <= 0 || !n.get(0).isIntegralNumber() || !n.get(1).isIntegralNumber()) {
      throw new CheckpointException(where + " must be two positive integers, got " + n);
    }
    return new int[] {n.get(0).asInt(), n.get(1).asInt()};
  }

  private static List<String> strings(JsonNode n, String where) {
    if (n.isMissingNode() || n.isNull()) return List.of();
    if (!n.isArray()) throw new CheckpointException(where + " must be a list of strings, got " + n);
    List<String> out = new ArrayList<>();
    for (JsonNode s : n) {
      if (!s.isTextual()) throw new CheckpointException(where + " must be a list of strings, got " + n);
      out.add(s.asText());
    }
    return List.copyOf(out);
  }

  private static void compileTarget(String target, String where) {
    if (target.startsWith("re:")) compile(target.substring(3), where);
  }

  private static Pattern compile(String regex, String where) {
    try {
      return Pattern.compile(regex);
    } catch (PatternSyntaxException e) {
      throw new CheckpointException(where + ": '" + regex + "' is not a valid regular expression: " + e.getDescription());
    }
  }

  public Format format() {
    return format;
  }

  public boolean isQuantized() {
    return format != Format.NONE;
  }

  /**
   * The scheme of a linear module (e.g. "model.layers.0.self_attn.q_proj"), or null when the config
   * keeps it in high precision (ignored, not targeted). With several matching compressed-tensors
   * groups the first wins, unless their schemes differ, which is refused as ambiguous.
   */
  public Scheme schemeOf(String module) {
    if (format == Format.NONE) return null;
    if (format == Format.FP8) {
      // transformers' should_convert_module: the key matches from the start (as a regex) or ends the name
      for (String k : keepHighPrecision) {
        if (Pattern.compile(k).matcher(module).lookingAt() || module.endsWith(k)) return null;
      }
      return groups.get(0).scheme();
    }
    for (String i : keepHighPrecision) if (ctMatches(module, i)) return null;
    Scheme found = null;
    for (Group g : groups) {
      if (g.targets().stream().noneMatch(t -> ctMatches(module, t))) continue;
      if (found != null && !found.equals(g.scheme())) {
        throw new CheckpointException(where + ": module '" + module + "' matches config groups of different schemes ("
            + found + "; " + g.scheme() + ")");
      }
      found = g.scheme();
    }
    return found;
  }

  /** compressed-tensors' match_name / _match_class: exact name, {@code re:} from the start, or the class Linear. */
  private static boolean ctMatches(String module, String target) {
    if (target.startsWith("re:")) return Pattern.compile(target.substring(3)).matcher(module).lookingAt();
    // every 2-D weight of these decoders but the embedding (an nn.Embedding) belongs to an nn.Linear
    if (target.equals("Linear")) return !module.endsWith("embed_tokens");
    return target.equals(module);
  }

  /** The scale tensor of an FP8 weight "x.weight": "x.weight_scale_inv" (fp8) or "x.weight_scale" (compressed-tensors). */
  public String scaleName(String weightName) {
    return weightName + (format == Format.FP8 ? "_scale_inv" : "_scale");
  }

  /** The static activation scale of module "x": "x.activation_scale" (fp8) or "x.input_scale" (compressed-tensors). */
  public String inputScaleName(String module) {
    return module + (format == Format.FP8 ? ".activation_scale" : ".input_scale");
  }

  /** Where the config came from, for messages. */
  public String where() {
    return where;
  }

  /** One line for logs and stats, e.g. "compressed-tensors fp8 (weights channel, activations dynamic token)". */
  public String describe() {
    if (format == Format.NONE) return "none";
    String name = format == Format.FP8 ? "fp8" : "compressed-tensors fp8";
    return name + " (" + String.join("; ", groups.stream().map(g -> g.scheme().toString()).distinct().toList()) + ")";
  }
}
