package io.longsieve.model;

/**
 * Where a family's decoder layer differs from Llama's ({@link #llama} for llama, mistral and qwen2),
 * read from config.json once so the backends branch on named traits, never on model_type.
 *
 * @param qkNorm            an RMSNorm over each head's q and k after the projection, before RoPE (Qwen3,
 *                          Gemma 3); keys are cached after it
 * @param unitOffsetNorms   RMSNorm weights are stored as offsets from 1, x̂ · (1 + w) (Gemma); the
 *                          loaders add the 1, so the forward pass multiplies as for any other model
 * @param sandwichNorms     an RMSNorm on the attention output and on the MLP output before each joins
 *                          the residual (Gemma 3's post_attention / post_feedforward norms)
 * @param geglu             the MLP is down(gelu_tanh(gate) · up) (Gemma 3) instead of down(silu(gate) · up)
 * @param embedScale        embeddings are multiplied by this (Gemma 3: √hidden), 1 otherwise
 * @param queryScale        attention logits are q·k times this: 1/√headDim, or Gemma 3's
 *                          query_pre_attn_scalar^-½
 * @param finalLogitSoftcap 0: none; else logits = c · tanh(logits / c) (final_logit_softcapping)
 * @param fusedProjections  the checkpoint stores q/k/v as one qkv_proj and gate/up as one gate_up_proj
 *                          (Phi-3); a storage layout only, the math is Llama's
 */
public record FamilyTraits(boolean qkNorm, boolean unitOffsetNorms, boolean sandwichNorms, boolean geglu,
                           double embedScale, double queryScale, double finalLogitSoftcap, boolean fusedProjections)
    implements java.io.Serializable {

  /** Llama's decoder: none of the extras, logits scaled by 1/√headDim. */
  public static FamilyTraits llama(int headDim) {
    return new FamilyTraits(false, false, false, false, 1, 1 / Math.sqrt(headDim), 0, false);
  }
}
