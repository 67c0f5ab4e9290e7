package io.longsieve.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * The parts of a Hugging Face {@code config.json} that the engine's decoder needs, read once at the
 * edge ({@link ConfigReader}) for the families it implements: llama, mistral, qwen2, qwen3, phi3 and
 * gemma3_text. Reads both the transformers 4.x spelling ({@code rope_scaling}, {@code torch_dtype})
 * and the 5.x one ({@code rope_parameters}, per layer type for Gemma 3; {@code dtype}). Other
 * architectures are refused, because their math differs in ways this engine does not implement.
 *
 * <p>The first seventeen components are the Llama-family core; {@code ropeTheta}, {@code ropeScaling}
 * and {@code slidingWindow} are those of the full-attention layers and of the sliding ones
 * ({@code layerKinds} has each layer's own); {@code traits} says where the family's layer differs
 * from Llama's.
 */
public record ModelConfig(
    String modelType,          // llama | mistral | qwen2 | qwen3 | phi3 | gemma3_text
    int hiddenSize,            // dim
    int intermediateSize,      // MLP hidden size
    int numLayers,
    int numHeads,
    int numKvHeads,
    int headDim,
    int vocabSize,
    double rmsNormEps,
    double ropeTheta,          // the full-attention layers' RoPE base
    RopeScaling ropeScaling,   // ... and scaling
    int maxPositions,          // max_position_embeddings as written
    boolean tieWordEmbeddings,
    boolean attentionBias,     // q/k/v projections carry a bias (Qwen2)
    int slidingWindow,         // the sliding layers' window; 0: no layer slides
    int bosTokenId,            // -1: none
    List<Integer> eosTokenIds,
    int rotaryDim,             // elements of a head RoPE rotates: headDim, less with partial_rotary_factor
    List<LayerKind> layerKinds, // (numLayers) each layer's window and RoPE
    FamilyTraits traits) implements Serializable {

  private static final ObjectMapper JSON = new ObjectMapper();

  /** A Llama-family config whose every layer attends the same way (tests, benchmarks). */
  public ModelConfig(String modelType, int hiddenSize, int intermediateSize, int numLayers, int numHeads, int numKvHeads,
                     int headDim, int vocabSize, double rmsNormEps, double ropeTheta, RopeScaling ropeScaling,
                     int maxPositions, boolean tieWordEmbeddings, boolean attentionBias, int slidingWindow, int bosTokenId,
                     List<Integer> eosTokenIds) {
    this(modelType, hiddenSize, intermediateSize, numLayers, numHeads, numKvHeads, headDim, vocabSize, rmsNormEps,
        ropeTheta, ropeScaling, maxPositions, tieWordEmbeddings, attentionBias, slidingWindow, bosTokenId, eosTokenIds,
        headDim, Collections.nCopies(numLayers, new LayerKind(slidingWindow, ropeTheta, ropeScaling)),
        FamilyTraits.llama(headDim));
  }

  public ModelConfig {
    eosTokenIds = List.copyOf(eosTokenIds);
    layerKinds = List.copyOf(layerKinds);
    if (layerKinds.size() != numLayers) {
      throw new IllegalArgumentException(layerKinds.size() + " layer kinds for " + numLayers + " layers");
    }
  }

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

  public LayerKind layerKind(int layer) {
    return layerKinds.get(layer);
  }

  /** Layer {@code layer}'s sliding window; 0 when it attends every earlier token. */
  public int window(int layer) {
    return layerKinds.get(layer).window();
  }

  /** Layers that attend within a sliding window. */
  public int slidingLayers() {
    int n = 0;
    for (LayerKind k : layerKinds) if (k.sliding()) n++;
    return n;
  }

  /**
   * The longest context the engine runs by default (--max-context overrides it):
   * max_position_embeddings, except that YaRN reaches factor × original_max_position_embeddings when
   * that is longer (Qwen's published 128K recipe keeps max_position_embeddings at 32K or 40K), and
   * dynamic NTK factor × max_position_embeddings (it scales beyond that length by design). Linear
   * scaling keeps max_position_embeddings: Gemma 3's global layers are linearly scaled by 8 with
   * max_position_embeddings already the 128K it was trained to.
   */
  public int contextLength() {
    return contextLength(maxPositions, ropeScaling);
  }

  static int contextLength(int maxPositions, RopeScaling s) {
    long n = maxPositions;
    if (s.type().equals("yarn")) n = Math.max(n, Math.round(s.factor() * s.originalMaxPositions()));
    if (s.type().equals("dynamic")) n = Math.round(s.factor() * maxPositions);
    return (int) Math.min(n, Integer.MAX_VALUE - 8);
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

  /** A config.json already read as JSON; {@code where} names it in refusals. */
  public static ModelConfig parse(JsonNode root, String where) {
    if (root == null || !root.isObject()) throw new CheckpointException(where + ": is not a JSON object");
    return new ConfigReader(root, where).read();
  }

  static List<Integer> idList(JsonNode node) {
    List<Integer> ids = new ArrayList<>();
    if (node.isArray()) node.forEach(n -> ids.add(n.asInt()));
    else if (node.isInt()) ids.add(node.asInt());
    return List.copyOf(ids);
  }
}
