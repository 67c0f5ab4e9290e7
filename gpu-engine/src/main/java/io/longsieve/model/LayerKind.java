package io.longsieve.model;

/**
 * How one decoder layer attends: over every earlier token or a sliding window of them, and the RoPE
 * it rotates with. Most models have one kind for all layers; Gemma 3 interleaves sliding-window
 * layers (local RoPE base) with global ones (global base, linear scaling), and Qwen2/Qwen3 with
 * {@code use_sliding_window} slide from layer {@code max_window_layers} on.
 *
 * @param window      0: full causal attention; else a query at position p sees positions
 *                    (p - window, p], as transformers' sliding_window_overlay
 * @param ropeTheta   RoPE base of this layer kind
 * @param ropeScaling its frequency scaling
 */
public record LayerKind(int window, double ropeTheta, RopeScaling ropeScaling) implements java.io.Serializable {

  public boolean sliding() {
    return window > 0;
  }
}
