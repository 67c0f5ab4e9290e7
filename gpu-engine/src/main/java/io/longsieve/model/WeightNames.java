package io.longsieve.model;

/** Tensor names of a Hugging Face Llama-family checkpoint (Llama, Mistral and Qwen2 share them). */
public final class WeightNames {
  private WeightNames() {}

  public static final String EMBED = "model.embed_tokens.weight";
  public static final String FINAL_NORM = "model.norm.weight";
  public static final String LM_HEAD = "lm_head.weight";

  public static String layer(int i, String suffix) {
    return "model.layers." + i + "." + suffix;
  }

  public static final String ATTN_NORM = "input_layernorm.weight";
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
}
