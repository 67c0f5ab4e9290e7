package io.longsieve.cli;

import io.longsieve.cuda.CudaModel;
import io.longsieve.model.LayerKind;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.TensorInfo;
import io.longsieve.model.TensorPlan;
import io.longsieve.policy.KvFootprint;
import io.longsieve.policy.PolicyCatalog;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyTerm;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What {@code inspect} computes about a checkpoint, from config.json and the safetensors headers
 * alone (no weight is read, no device opened), so that every figure is plain arithmetic a test can
 * hold to a config's own numbers.
 *
 * <p>Weights: the stored sizes of every tensor the headers list (end − start), so an FP8 tensor
 * counts one byte an element with no special case; on the GPU a matrix is held in bf16 unless it is
 * stored narrower, and a 1-D tensor (norm, bias) in f32 (cuda/CudaWeights). KV: {@link KvFootprint}.
 * Fit: of {@code gpuMemory × memoryFraction} (the share of free memory the engine takes, as the
 * job's gpuMemoryFraction), the weights and the activations of one prefill chunk
 * (CudaModel.activationBytes) come first; the rest holds KV pages.
 *
 * @param config       the config as the engine reads it
 * @param architecture architectures[0] of config.json, or ""
 * @param tensors      every tensor header of the checkpoint
 * @param problems     what the engine's loaders would refuse ({@link TensorPlan#problems}); empty when all is there
 */
record Inspection(ModelConfig config, String architecture, List<TensorInfo> tensors, List<String> problems) {

  static Inspection of(ModelConfig c, String architecture, List<TensorInfo> tensors, List<String> problems) {
    return new Inspection(c, architecture, List.copyOf(tensors), List.copyOf(problems));
  }

  /** Elements of every tensor in the checkpoint (a tied lm_head stored once is counted once). */
  long parameters() {
    long n = 0;
    for (TensorInfo t : tensors) n += t.numel();
    return n;
  }

  /** Bytes the files store for the tensors: the headers' data offsets. */
  long storedBytes() {
    long n = 0;
    for (TensorInfo t : tensors) n += t.end() - t.start();
    return n;
  }

  /** Bytes the weights take on the GPU: matrices bf16 unless stored narrower, 1-D tensors f32. */
  long deviceWeightBytes() {
    long n = 0;
    for (TensorInfo t : tensors) {
      long stored = t.end() - t.start();
      n += t.shape().length >= 2 ? Math.min(stored, t.numel() * 2) : t.numel() * 4;
    }
    return n;
  }

  /** Tensors per stored dtype, most first ("BF16 399"). */
  Map<String, Integer> dtypes() {
    Map<String, Integer> count = new TreeMap<>();
    for (TensorInfo t : tensors) count.merge(t.dtype().name(), 1, Integer::sum);
    Map<String, Integer> sorted = new LinkedHashMap<>();
    count.entrySet().stream().sorted((a, b) -> b.getValue() - a.getValue()).forEach(e -> sorted.put(e.getKey(), e.getValue()));
    return sorted;
  }

  /** KV bytes per token slot of the GPU cache (keys before and after RoPE, values, bf16). */
  long kvSlotBytes() {
    return KvFootprint.slotBytes(config);
  }

  /** The KV policies of the catalog at their default parameters, in catalog order. */
  static List<PolicyTerm> kvPolicies() {
    List<PolicyTerm> out = new ArrayList<>();
    for (String name : PolicyCatalog.namesFor(PolicyCatalog.Slot.KV)) out.add(PolicySpec.parse("kv=" + name).kv());
    return out;
  }

  /** What one KV policy keeps of an {@code n}-token prompt and holds for a sequence of {@code n} slots. */
  record KvLine(PolicyTerm term, long keptSlots, long bytesInUse, long heldBytes, boolean onGpu) {}

  List<KvLine> kvLines(long n) {
    List<KvLine> out = new ArrayList<>();
    for (PolicyTerm t : kvPolicies()) {
      out.add(new KvLine(t, KvFootprint.keptSlots(t, n), KvFootprint.bytesInUse(config, t, n),
          KvFootprint.heldBytes(config, t, n), PolicyCatalog.runsOn(t.name(), PolicyCatalog.Backend.CUDA)));
    }
    return out;
  }

  /**
   * How much fits in GPU memory: the budget, what weights and activations take of it, the room left
   * for KV, the longest single document (prompt + output slots, whole pages) and how many
   * sequences of {@code docTokens} slots fit at once under each KV policy (by what they hold).
   */
  record Fit(long budget, long weights, long activations, long kvRoom, long longestTokens, Map<String, Long> concurrent) {}

  Fit fit(long gpuMemory, double memoryFraction, int prefillChunk, long docTokens) {
    long budget = (long) (gpuMemory * memoryFraction);
    long weights = deviceWeightBytes();
    long activations = CudaModel.activationBytes(config, Math.max(prefillChunk, io.longsieve.cuda.CudaRunner.MIN_GPU_CHUNK));
    long room = Math.max(0, budget - weights - activations);
    long pageBytes = KvFootprint.PAGE * kvSlotBytes() + 4;  // a page of every layer's slots, and its page-table entry
    long longest = room / pageBytes * KvFootprint.PAGE;
    Map<String, Long> concurrent = new LinkedHashMap<>();
    for (PolicyTerm t : kvPolicies()) {
      if (!PolicyCatalog.runsOn(t.name(), PolicyCatalog.Backend.CUDA)) continue;
      concurrent.put(t.name(), room / KvFootprint.heldBytes(config, t, docTokens));
    }
    return new Fit(budget, weights, activations, room, longest, concurrent);
  }

  /** Layer kinds in order of first use, with their layer counts: "sliding window 1024, RoPE base 10000: 40 layers". */
  Map<LayerKind, Integer> layerKinds() {
    Map<LayerKind, Integer> kinds = new LinkedHashMap<>();
    for (LayerKind k : config.layerKinds()) kinds.merge(k, 1, Integer::sum);
    return kinds;
  }

  /** Problems as a count per kind, for the one-line refusal. */
  String problemSummary() {
    Map<String, Integer> n = new HashMap<>();
    for (String p : problems) n.merge(p.endsWith(": missing") ? "missing" : "of another shape", 1, Integer::sum);
    List<String> parts = new ArrayList<>();
    n.forEach((k, v) -> parts.add(v + " " + k));
    return String.join(", ", parts) + " (first: " + problems.get(0) + ")";
  }
}
