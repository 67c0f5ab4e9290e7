package io.longsieve.policy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.logging.Logger;

/**
 * Which layers Token Sparse Attention makes sparse: {@code tsa:layers=...} takes {@code auto},
 * {@code all}, {@code none} or a list of layers and ranges joined by {@code /} (e.g.
 * {@code 15-30} or {@code 2/4-6}; commas separate parameters, so they cannot separate layers).
 *
 * <p>{@code auto} reads {@value #FILE_NAME} in the model folder, written by {@code longsieve
 * profile} ({@link SparseLayerProfile}: by default the layers chosen greedily under a budget of
 * measured KL against dense attention; with {@code --method drift} the paper's rule, layers at or
 * below the δ-quantile of representation drift). When that file does not exist the default is the
 * <b>second half of the layers</b> ({@code numLayers/2 .. numLayers-1}), which is what the official
 * code uses for models it has no profile for, and close to its profiled Llama-3.1-8B list (15..30 of
 * 32); such a run says so, once per model folder in the log and in {@code policy_resolved}
 * ({@code layers=auto-unprofiled(3-5)}, {@link #describe}).
 */
public final class LayerList {
  private LayerList() {}

  private static final Logger LOG = Logger.getLogger(LayerList.class.getName());
  /** Model folders whose missing profile was already logged (a policy is built per request). */
  private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

  /** Per-model layer list written by the profile command, read by {@code layers=auto}. */
  public static final String FILE_NAME = "longsieve-sparse-layers.json";

  private static final ObjectMapper JSON = new ObjectMapper();

  /** The highest layer number a list may name; no model comes near, and 15-99999999 stays a small list. */
  static final int MAX_LAYER = 9999;

  /** Validates a layers value; returns the explicit list, or null for auto/all/none. */
  static List<Integer> parse(String value, String where) {
    if (value.equals("auto") || value.equals("all") || value.equals("none")) return null;
    List<Integer> out = new ArrayList<>();
    for (String part : value.split("/", -1)) {
      int dash = part.indexOf('-');
      int a = layer(dash < 0 ? part : part.substring(0, dash), where);
      int b = dash < 0 ? a : layer(part.substring(dash + 1), where);
      if (b < a) throw new IllegalArgumentException(where + ": layers must be auto, all, none or e.g. 15-30 or 2/4-6");
      for (int l = a; l <= b; l++) out.add(l);
    }
    return out;
  }

  private static int layer(String text, String where) {
    if (!text.matches("\\d+")) {
      throw new IllegalArgumentException(where + ": layers must be auto, all, none or e.g. 15-30 or 2/4-6");
    }
    // compared as text first: a number of many digits overflows any integer type
    if (text.replaceFirst("^0+(?=\\d)", "").length() > 4 || Integer.parseInt(text) > MAX_LAYER) {
      throw new IllegalArgumentException(where + ": layer " + text + " is too large (at most " + MAX_LAYER + ")");
    }
    return Integer.parseInt(text);
  }

  /** The sparse-layer mask for a model of {@code numLayers}; modelDir may be null (no profile file). */
  public static boolean[] resolve(String value, int numLayers, Path modelDir) {
    boolean[] mask = new boolean[numLayers];
    switch (value) {
      case "none":
        return mask;
      case "all":
        java.util.Arrays.fill(mask, true);
        return mask;
      case "auto": {
        List<Integer> listed = profiled(modelDir) ? read(modelDir.resolve(FILE_NAME)) : null;
        if (listed == null) {
          for (int l = numLayers / 2; l < numLayers; l++) mask[l] = true;
          if (WARNED.add(String.valueOf(modelDir))) {
            LOG.warning("tsa layers=auto: " + (modelDir == null ? "no model folder" : modelDir + " has no " + FILE_NAME)
                + "; the unprofiled fallback makes the second half of the layers sparse (" + format(mask)
                + "); run 'longsieve profile --model ...' to choose them by measured fidelity");
          }
          return mask;
        }
        for (int l : listed) if (l < numLayers) mask[l] = true;
        return mask;
      }
      default:
        for (int l : parse(value, "tsa")) {
          if (l >= numLayers) throw new IllegalArgumentException("tsa: layer " + l + " >= numLayers " + numLayers);
          mask[l] = true;
        }
        return mask;
    }
  }

  /** True when {@code modelDir} (may be null) holds a sparse-layer profile that {@code auto} reads. */
  public static boolean profiled(Path modelDir) {
    return modelDir != null && Files.isRegularFile(modelDir.resolve(FILE_NAME));
  }

  /**
   * What a layers value resolved to, for {@code policy_resolved}: {@code auto(2-3)} from a profile,
   * {@code auto-unprofiled(3-5)} for the fallback, else the value with its layers, e.g. {@code all(0-5)}.
   *
   * @param resolved the resolved mask as {@link #format} writes it
   */
  public static String describe(String value, String resolved, Path modelDir) {
    String label = value.equals("auto") && !profiled(modelDir) ? "auto-unprofiled" : value;
    return label + "(" + resolved + ")";
  }

  /** The {@code sparse_layers} array of a profile file. */
  public static List<Integer> read(Path file) {
    try {
      JsonNode root = JSON.readTree(file.toFile());
      JsonNode arr = root.path("sparse_layers");
      if (!arr.isArray()) throw new IllegalArgumentException(file + ": no 'sparse_layers' array");
      List<Integer> out = new ArrayList<>();
      arr.forEach(n -> out.add(n.asInt()));
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(file + ": not a readable sparse-layer file", e);
    }
  }

  /** Compact text form of a mask: {@code 2-3/5}, or {@code none}. */
  public static String format(boolean[] mask) {
    StringBuilder b = new StringBuilder();
    for (int l = 0; l < mask.length; l++) {
      if (!mask[l]) continue;
      int e = l;
      while (e + 1 < mask.length && mask[e + 1]) e++;
      if (b.length() > 0) b.append('/');
      b.append(l);
      if (e > l) b.append('-').append(e);
      l = e;
    }
    return b.length() == 0 ? "none" : b.toString();
  }
}
