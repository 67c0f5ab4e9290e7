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
 * rotary, no window or the same window on every layer (Mistral v0.1). Verified on an H100 on 2026-12-05
 * (FamilyForwardParityTest, FamilyKernelsParityTest, RopeLayoutParityTest, ForwardParityTest): qwen3 (q/k
 * norm), phi3 (fused weights, partial rotary, LongRoPE), gemma3_text (sliding windows per layer, two RoPE
 * bases, sandwich norms, GeGLU, embedding scale, soft-capping), and the yarn, linear, dynamic and longrope
 * scalings. Gemma 3's head_dim 256 ran as the test models' 32 (the same CUDA-core split attention).
 */
public final class GpuVerifiedFamilies {
  private GpuVerifiedFamilies() {}

  /** model_type values verified with Llama's traits (a checkpoint of theirs with other traits is not). */
  static final Set<String> LLAMA_LIKE = Set.of("llama", "mistral", "qwen2");
  /** model_type values verified with their own family's traits (q/k norm, fused weights, Gemma's norms...). */
  static final Set<String> OWN_TRAITS = Set.of("qwen3", "phi3", "gemma3_text");
  /** RoPE scaling types whose CUDA tables ran on a GPU. */
  static final Set<String> ROPE_TYPES = Set.of("default", "llama3", "yarn", "linear", "dynamic", "longrope");

  /** null when the model's CUDA path is verified, else what is not (one line, for logs and stats). */
  public static String unverifiedReason(ModelConfig c) {
    List<String> not = new ArrayList<>();
    boolean llamaLike = LLAMA_LIKE.contains(c.modelType());
    if (!llamaLike && !OWN_TRAITS.contains(c.modelType())) not.add("model_type " + c.modelType());
    for (LayerKind k : c.layerKinds()) {
      String t = k.ropeScaling().type();
      if (!ROPE_TYPES.contains(t) && !not.contains("rope " + t)) not.add("rope " + t);
    }
    if (llamaLike && !c.traits().equals(FamilyTraits.llama(c.headDim()))) not.add("family traits " + c.traits());
    return not.isEmpty() ? null : "the CUDA path for " + String.join(", ", not) + " has not run on a GPU yet";
  }
}
