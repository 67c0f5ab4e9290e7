package io.longsieve.model;

/**
 * Tensor names of the Hugging Face checkpoints the engine loads (Llama, Mistral, Qwen2, Qwen3, Phi-3
 * and Gemma 3 share the layout; {@link TensorPlan} says which a config needs and of which shape).
 */
public final class WeightNames {
  private WeightNames() {}

  public static final String EMBED = "model.embed_tokens.weight";
  public static final String FINAL_NORM = "model.norm.weight";
  public static final String LM_HEAD = "lm_head.weight";

  public static String layer(int i, String suffix) {
    return "model.layers." + i + "." + suffix;
  }

  public static final String ATTN_NORM = "input_layernorm.weight";
  /** Llama's norm before the MLP; Gemma 3 applies the tensor of this name to the attention output instead. */
  public static final String FFN_NORM = "post_attention_layernorm.weight";
  public static final String WQ = "self_attn.q_proj.weight";
  public static final String WK = "self_attn.k_proj.weight";
  public static final String WV = "self_attn.v_proj.weight";
  public static final String WO = "self_attn.o_proj.weight";
  public static final String BQ = "self_attn.q_proj.bias";
  public static final String BK = "self_attn.k_proj.bias";
  public static final String BV = "self_attn.v_proj.bias";
  public static final String W_GATE = "mlp.gate_proj.weight";
  public static final String W_UP = "mlp.up_proj.weight";
  public static final String W_DOWN = "mlp.down_proj.weight";
  /** Qwen3, Gemma 3: RMSNorm weights over one head's q and k (headDim). */
  public static final String Q_NORM = "self_attn.q_norm.weight";
  public static final String K_NORM = "self_attn.k_norm.weight";
  /** Phi-3: q, k and v rows in one matrix (qDim + 2 kvDim, dim), in that order. */
  public static final String WQKV = "self_attn.qkv_proj.weight";
  /** Phi-3: gate and up rows in one matrix (2 hidden, dim), gate first. */
  public static final String W_GATE_UP = "mlp.gate_up_proj.weight";
  /** Gemma 3: the norm before the MLP, and the one on the MLP's output. */
  public static final String PRE_FFN_NORM = "pre_feedforward_layernorm.weight";
  public static final String POST_FFN_NORM = "post_feedforward_layernorm.weight";
}
