package io.longsieve.model;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The tensors of a checkpoint folder: {@code model.safetensors}, or the shards listed by
 * {@code model.safetensors.index.json}. A shard name that resolves outside the folder is refused,
 * so a hostile index cannot make the engine map arbitrary files. FP8 weights (F8_E4M3 with a scale
 * beside them, see {@link QuantizationConfig}) are checked with their scales wherever a shape is
 * checked, and dequantized to fp32 by {@link #loadF32}. Closing unmaps every shard.
 */
public final class Checkpoint implements AutoCloseable {

  private static final ObjectMapper JSON = new ObjectMapper();

  private final Path dir;
  private final List<SafetensorsFile> files;
  private final Map<String, SafetensorsFile> owner;
  private final QuantizationConfig quantization;

  private Checkpoint(Path dir, List<SafetensorsFile> files, Map<String, SafetensorsFile> owner,
                     QuantizationConfig quantization) {
    this.dir = dir;
    this.files = files;
    this.owner = owner;
    this.quantization = quantization;
  }

  public static Checkpoint open(Path dir) {
    // first, so that a GPTQ or AWQ checkpoint is refused by its method, not by its first int32 tensor
    QuantizationConfig quantization = QuantizationConfig.read(dir);
    Path index = dir.resolve("model.safetensors.index.json");
    Path single = dir.resolve("model.safetensors");
    List<Path> shards = new ArrayList<>();
    Map<String, String> weightMap = null;
    if (Files.isRegularFile(index)) {
      weightMap = readIndex(dir, index);
      weightMap.values().stream().distinct().sorted().forEach(f -> shards.add(dir.resolve(f)));
    } else if (Files.isRegularFile(single)) {
      shards.add(single);
    } else {
      throw new CheckpointException(dir + ": no model.safetensors or model.safetensors.index.json in the model folder");
    }
    List<SafetensorsFile> opened = new ArrayList<>();
    try {
      Map<String, SafetensorsFile> owner = new HashMap<>();
      for (Path shard : shards) {
        if (!Files.isRegularFile(shard)) throw new CheckpointException(index + ": shard '" + dir.relativize(shard) + "' does not exist");
        SafetensorsFile f = SafetensorsFile.open(shard);
        opened.add(f);
        for (String name : f.tensors().keySet()) {
          SafetensorsFile prev = owner.put(name, f);
          if (prev != null) throw new CheckpointException(shard + ": tensor '" + name + "' is also in " + prev.path());
        }
      }
      if (weightMap != null) checkIndexAgrees(dir, index, weightMap, owner);
      return new Checkpoint(dir, opened, owner, quantization);
    } catch (RuntimeException e) {
      opened.forEach(SafetensorsFile::close);
      throw e;
    }
  }

  private static Map<String, String> readIndex(Path dir, Path index) {
    JsonNode root;
    try {
      root = JSON.readTree(index.toFile());
    } catch (IOException e) {
      throw new CheckpointException(index + ": not valid JSON: " + e.getMessage(), e);
    }
    JsonNode map = root.path("weight_map");
    if (!map.isObject() || map.isEmpty()) throw new CheckpointException(index + ": field 'weight_map' is missing or empty");
    Path base = dir.toAbsolutePath().normalize();
    Map<String, String> out = new LinkedHashMap<>();
    for (Iterator<Map.Entry<String, JsonNode>> it = map.fields(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      String file = e.getValue().asText("");
      Path resolved = base.resolve(file).normalize();
      if (file.isEmpty() || Path.of(file).isAbsolute() || !resolved.startsWith(base) || resolved.equals(base)) {
        throw new CheckpointException(index + ": weight_map['" + e.getKey() + "'] = '" + file
            + "' points outside the model folder");
      }
      out.put(e.getKey(), base.relativize(resolved).toString());
    }
    return out;
  }

  private static void checkIndexAgrees(Path dir, Path index, Map<String, String> weightMap,
                                       Map<String, SafetensorsFile> owner) {
    for (Map.Entry<String, String> e : weightMap.entrySet()) {
      SafetensorsFile f = owner.get(e.getKey());
      if (f == null || !f.path().equals(dir.resolve(e.getValue()))) {
        throw new CheckpointException(index + ": weight_map says tensor '" + e.getKey() + "' is in '" + e.getValue()
            + "' but that shard does not hold it");
      }
    }
  }

  public Path dir() {
    return dir;
  }

  /** Every tensor's header, all shards (inspect counts bytes from their stored sizes). */
  public java.util.List<TensorInfo> tensors() {
    java.util.List<TensorInfo> out = new ArrayList<>();
    for (SafetensorsFile f : files) out.addAll(f.tensors().values());
    return out;
  }

  public boolean has(String name) {
    return owner.containsKey(name);
  }

  public TensorInfo info(String name) {
    SafetensorsFile f = owner.get(name);
    if (f == null) throw new CheckpointException(dir + ": tensor '" + name + "' is missing from the checkpoint");
    return f.tensors().get(name);
  }

  public QuantizationConfig quantization() {
    return quantization;
  }

  /**
   * The tensor's header after checking its shape against what the config implies (and, for an FP8
   * weight, its scales: {@link #fp8}); a missing tensor or another shape is a CheckpointException
   * naming the file and the tensor.
   */
  public TensorInfo infoOfShape(String name, long... expectedShape) {
    TensorInfo t = info(name);
    if (!Arrays.equals(t.shape(), expectedShape)) {
      throw new CheckpointException(t.file() + ": tensor '" + name + "' has shape " + t.shapeString() + ", config.json implies "
          + Arrays.toString(expectedShape));
    }
    if (t.dtype() == DType.F8_E4M3) fp8(name);
    return t;
  }

  /** The FP8 weight {@code name} (dtype F8_E4M3) with its scales, checked against the quantization config. */
  public Fp8Weight fp8(String name) {
    return Fp8Weight.resolve(this, quantization, info(name));
  }

  /**
   * Loads a tensor widened to fp32, after checking its shape against what the config implies; an
   * FP8 weight comes back dequantized ({@link Fp8Weight#dequantize}), and a scale that is not a
   * finite number is refused.
   */
  public float[] loadF32(String name, long... expectedShape) {
    TensorInfo t = infoOfShape(name, expectedShape);
    float[] out = readAll(t);
    if (t.dtype() == DType.F8_E4M3) {
      Fp8Weight w = fp8(name);
      float[] scales = readAll(w.scale());
      for (float s : scales) {
        if (!Float.isFinite(s)) throw new CheckpointException(w.scale().file() + ": scale '" + w.scale().name() + "' holds " + s);
      }
      w.dequantize(out, scales);
    }
    return out;
  }

  /** The whole tensor widened to fp32, without a shape check (scales, input scales). */
  public float[] readAll(TensorInfo t) {
    if (t.numel() > Integer.MAX_VALUE - 8) throw new CheckpointException(t.file() + ": tensor '" + t.name() + "' is too large for the CPU backend");
    float[] out = new float[(int) t.numel()];
    owner.get(t.name()).readFloats(t, out);
    return out;
  }

  /** The dtype most tensors are stored in, for stats and the default compute type. */
  public DType storageType() {
    Map<DType, Integer> count = new HashMap<>();
    for (SafetensorsFile f : files) f.tensors().values().forEach(t -> count.merge(t.dtype(), 1, Integer::sum));
    return count.entrySet().stream().max(Map.Entry.comparingByValue()).map(Map.Entry::getKey).orElse(DType.F32);
  }

  @Override
  public void close() {
    files.forEach(SafetensorsFile::close);
  }
}
