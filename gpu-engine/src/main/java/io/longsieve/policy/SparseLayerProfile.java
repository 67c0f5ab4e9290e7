package io.longsieve.policy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.function.ToDoubleFunction;
import java.util.stream.IntStream;

/**
 * Token Sparse Attention's sparse layers chosen by measured fidelity ({@code longsieve profile --method kl},
 * the default; docs/fidelity.md): the KL against dense attention that making each layer sparse <i>alone</i>
 * costs at the policy's settings (mean over calibration documents of the per-token KL along dense
 * attention's own greedy continuation), then a greedy pick under a KL budget: layers in order of their
 * own KL, each added when the measured KL of the set with it stays within the budget (KL does not add up
 * across layers, so every candidate set is measured: at most one more run per layer).
 *
 * <p>Writes {@value LayerList#FILE_NAME} ({@link #write}), the file {@code tsa:layers=auto} reads: besides
 * {@code sparse_layers}, the method, the budget, every layer's own KL and the KL of the chosen set.
 */
public final class SparseLayerProfile {
  private SparseLayerProfile() {}

  /** The greedy pick: the chosen layers (ascending) and the measured KL of each accepted set, in order of acceptance. */
  public record Choice(List<Integer> layers, double kl, List<Step> steps) {}

  /** One candidate of the greedy pass: the layer tried, the KL of the set with it, and whether it stayed. */
  public record Step(int layer, double klWith, boolean kept) {}

  /**
   * Greedy selection under {@code budget}.
   *
   * @param singleKl (layer) KL of making that layer alone sparse
   * @param measure  KL of making the layers of a mask sparse together (called only for sets of two or more)
   */
  public static Choice choose(double[] singleKl, double budget, ToDoubleFunction<boolean[]> measure) {
    List<Integer> order = IntStream.range(0, singleKl.length).boxed()
        .sorted(Comparator.<Integer>comparingDouble(l -> singleKl[l]).thenComparing(l -> l)).toList();
    boolean[] mask = new boolean[singleKl.length];
    List<Step> steps = new ArrayList<>();
    double kl = 0;
    int chosen = 0;
    for (int l : order) {
      if (!(singleKl[l] <= budget)) { // this layer alone is over the budget already (or was not measured)
        steps.add(new Step(l, singleKl[l], false));
        continue;
      }
      mask[l] = true;
      double with = chosen == 0 ? singleKl[l] : measure.applyAsDouble(mask.clone());
      boolean keep = with <= budget;
      steps.add(new Step(l, with, keep));
      if (keep) {
        kl = with;
        chosen++;
      } else {
        mask[l] = false;
      }
    }
    List<Integer> layers = new ArrayList<>();
    for (int l = 0; l < mask.length; l++) if (mask[l]) layers.add(l);
    return new Choice(layers, kl, steps);
  }

  /**
   * The policy with its TSA layers set to the mask, e.g. {@code layers=4/5}.
   *
   * @throws IllegalArgumentException when the policy's prefill is not tsa, or the mask is empty
   */
  public static PolicySpec withLayers(PolicySpec policy, boolean[] mask) {
    if (!policy.prefill().name().equals("tsa")) {
      throw new IllegalArgumentException("the profile measures Token Sparse Attention: the policy's prefill must be tsa, not '"
          + policy.prefill().name() + "'");
    }
    String layers = LayerList.format(mask);
    if (layers.equals("none")) throw new IllegalArgumentException("no layer to make sparse");
    return new PolicySpec(policy.prefill().withText("layers", layers), policy.kv(), policy.decode());
  }

  /** The mask with only {@code layer} set. */
  public static boolean[] only(int layers, int layer) {
    boolean[] m = new boolean[layers];
    m[layer] = true;
    return m;
  }

  /** What the calibration was, for the file. */
  public record Calibration(String source, int documents, int tokensMax, int continuationTokens) {}

  /** Writes the per-model file {@code layers=auto} reads ({@link LayerList#FILE_NAME}) for the KL method. */
  public static void write(Path file, String model, PolicySpec policy, Calibration cal, double budget, double[] singleKl,
                           Choice choice) throws IOException {
    ObjectMapper json = new ObjectMapper();
    ObjectNode root = json.createObjectNode();
    root.put("model", model);
    root.put("method", "kl");
    root.put("policy", policy.canonical());
    root.put("calibration", cal.source());
    root.put("calibration_documents", cal.documents());
    root.put("calibration_tokens", cal.tokensMax());
    root.put("continuation_tokens", cal.continuationTokens());
    root.put("kl_budget", budget);
    ArrayNode per = root.putArray("kl_per_layer"); // KL(dense ‖ policy) per token with only that layer sparse, nats
    for (double k : singleKl) per.add(k);
    ArrayNode steps = root.putArray("greedy");
    for (Step s : choice.steps()) steps.addObject().put("layer", s.layer()).put("kl_with", s.klWith()).put("kept", s.kept());
    root.put("kl_of_chosen", choice.kl());
    ArrayNode layers = root.putArray("sparse_layers");
    choice.layers().forEach(layers::add);
    json.writerWithDefaultPrettyPrinter().writeValue(file.toFile(), root);
  }
}
