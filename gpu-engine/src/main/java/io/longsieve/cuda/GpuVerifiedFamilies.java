package io.longsieve.cuda;

import io.longsieve.model.FamilyTraits;
import io.longsieve.model.LayerKind;
import io.longsieve.model.ModelConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * THE list of what the CUDA backend's path has been verified for on a GPU: the families and RoPE
 * scalings whose gpu-tagged parity tests (CPU reference vs the kernels) and end-to-end runs passed on
 * real hardware. {@code --device auto} runs anything outside it on the CPU and says why;
 * {@code --device cuda} still runs it (that is how it gets verified). After a GPU run of the tests
 * docs/models.md names, add the family here and flip its row there.
 *
 * <p>Verified on the H200 (bench/RESULTS.md): llama, mistral, qwen2 with plain or llama3 RoPE, full
 * rotary, no window or the same window on every layer (Mistral v0.1). Written and compiled but not yet run on a GPU: qwen3 (q/k norm), phi3
 * (fused weights, partial rotary, LongRoPE), gemma3_text (sliding windows per layer, two RoPE
 * bases, sandwich norms, GeGLU, embedding scale, soft-capping, head_dim 256), and the yarn, linear,
 * dynamic and longrope scalings on any family.
 */
public final class GpuVerifiedFamilies {
  private GpuVerifiedFamilies() {}

  /** model_type values whose CUDA path ran on a GPU. */
  static final Set<String> FAMILIES = Set.of("llama", "mistral", "qwen2");
  /** RoPE scaling types whose CUDA tables ran on a GPU. */
  static final Set<String> ROPE_TYPES = Set.of("default", "llama3");

  /** null when the model's CUDA path is verified, else what is not (one line, for logs and stats). */
  public static String unverifiedReason(ModelConfig c) {
    List<String> not = new ArrayList<>();
    if (!FAMILIES.contains(c.modelType())) not.add("model_type " + c.modelType());
    for (LayerKind k : c.layerKinds()) {
      String t = k.ropeScaling().type();
      if (!ROPE_TYPES.contains(t) && !not.contains("rope " + t)) not.add("rope " + t);
    }
    if (c.rotaryDim() != c.headDim()) not.add("partial rotary");
    if (c.slidingLayers() > 0 && c.slidingLayers() < c.numLayers()) not.add("interleaved sliding-window layers");
    FamilyTraits llama = FamilyTraits.llama(c.headDim());
    if (!c.traits().equals(llama) && FAMILIES.contains(c.modelType())) not.add("family traits " + c.traits());
    return not.isEmpty() ? null : "the CUDA path for " + String.join(", ", not) + " has not run on a GPU yet";
  }
}
