package io.longsieve.policy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Token Sparse Attention's layer selection by representation drift (official
 * {@code profile/profile.py}, research/algorithms.md §2.4): per layer, the mean over calibration
 * tokens of ‖h_out − h_in‖₂ / (‖h_in‖₂ + 1e-8) of the residual stream around the decoder layer;
 * layers whose drift is at or below the δ-quantile (linear interpolation, as torch.quantile) are
 * the sparse ones, because attention changes their representation least.
 */
public final class DriftProfile {

  private final double[] sum;  // (layer) Σ over tokens of the relative drift
  private final long[] tokens; // (layer) tokens seen

  public DriftProfile(int layers) {
    sum = new double[layers];
    tokens = new long[layers];
  }

  /** Adds rows 0 .. n-1 of the (n, dim) residual stream before and after a layer. */
  public void accumulate(int layer, float[] hIn, float[] hOut, int n, int dim) {
    for (int i = 0; i < n; i++) {
      double diff = 0, in = 0;
      for (int e = 0; e < dim; e++) {
        double a = hIn[i * dim + e], b = hOut[i * dim + e];
        diff += (b - a) * (b - a);
        in += a * a;
      }
      sum[layer] += Math.sqrt(diff) / (Math.sqrt(in) + 1e-8);
    }
    tokens[layer] += n;
  }

  /** Mean drift per layer. */
  public double[] drift() {
    double[] d = new double[sum.length];
    for (int l = 0; l < d.length; l++) d[l] = tokens[l] > 0 ? sum[l] / tokens[l] : Double.NaN;
    return d;
  }

  /** Layers with drift ≤ the δ-quantile of all layers' drift. */
  public static List<Integer> sparseLayers(double[] drift, double delta) {
    double threshold = quantile(drift, delta);
    List<Integer> out = new ArrayList<>();
    for (int l = 0; l < drift.length; l++) if (drift[l] <= threshold) out.add(l);
    return out;
  }

  /** torch.quantile with linear interpolation. */
  static double quantile(double[] v, double q) {
    double[] s = v.clone();
    Arrays.sort(s);
    double pos = q * (s.length - 1);
    int lo = (int) Math.floor(pos), hi = (int) Math.ceil(pos);
    return s[lo] + (s[hi] - s[lo]) * (pos - lo);
  }

  /** Writes the per-model file {@code layers=auto} reads ({@link LayerList#FILE_NAME}). */
  public static void write(Path file, String model, String calibration, int calibrationTokens, double delta,
                           double[] drift, List<Integer> sparse) throws IOException {
    ObjectMapper json = new ObjectMapper();
    ObjectNode root = json.createObjectNode();
    root.put("model", model);
    root.put("method", "drift");
    root.put("calibration", calibration);
    root.put("calibration_tokens", calibrationTokens);
    root.put("delta", delta);
    double total = 0;
    for (double d : drift) total += d;
    ArrayNode raw = root.putArray("drift");
    ArrayNode norm = root.putArray("drift_normalised");
    for (double d : drift) {
      raw.add(d);
      norm.add(d / total);
    }
    ArrayNode layers = root.putArray("sparse_layers");
    sparse.forEach(layers::add);
    json.writerWithDefaultPrettyPrinter().writeValue(file.toFile(), root);
  }
}
