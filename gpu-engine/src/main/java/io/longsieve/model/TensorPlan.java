package io.longsieve.model;

import static io.longsieve.model.WeightNames.*;

import java.util.ArrayList;
import java.util.List;

/**
 * The tensors the engine loads for a config, each with the shape config.json implies, and the name of
 * each layer tensor by the role the forward pass gives it. The one list the weight loaders
 * (CpuWeights, CudaWeights), the check before Spark starts and {@code inspect} read, so that what
 * {@code inspect} calls present is what the loaders will find.
 */
public final class TensorPlan {
  private TensorPlan() {}

  /** One tensor: its name, the shape config.json implies, and whether it may be absent (a tied lm_head). */
  public record Tensor(String name, long[] shape, boolean optional) {}

  /** The norm before the MLP: Gemma 3's pre_feedforward_layernorm, else post_attention_layernorm. */
  public static String ffnNorm(ModelConfig c, int layer) {
    return layer(layer, c.traits().sandwichNorms() ? PRE_FFN_NORM : FFN_NORM);
  }

  /** The norm on the attention output (Gemma 3's post_attention_layernorm), or null. */
  public static String postAttentionNorm(ModelConfig c, int layer) {
    return c.traits().sandwichNorms() ? layer(layer, FFN_NORM) : null;
  }

  /** The norm on the MLP output (Gemma 3's post_feedforward_layernorm), or null. */
  public static String postFeedForwardNorm(ModelConfig c, int layer) {
    return c.traits().sandwichNorms() ? layer(layer, POST_FFN_NORM) : null;
  }

  /**
   * An RMSNorm weight as the forward pass multiplies by it: Gemma stores offsets from 1, so 1 + w
   * (the fp32 sum transformers' Gemma3RMSNorm computes on every call); others as stored.
   */
  public static float[] normWeight(Checkpoint ck, ModelConfig c, String name, long n) {
    float[] w = ck.loadF32(name, n);
    if (c.traits().unitOffsetNorms()) for (int i = 0; i < w.length; i++) w[i] = 1.0f + w[i];
    return w;
  }

  /** Every tensor the engine loads, in load order. */
  public static List<Tensor> of(ModelConfig c) {
    long dim = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), hidden = c.intermediateSize(), vocab = c.vocabSize();
    long d = c.headDim();
    FamilyTraits t = c.traits();
    List<Tensor> out = new ArrayList<>();
    out.add(new Tensor(EMBED, new long[] {vocab, dim}, false));
    for (int i = 0; i < c.numLayers(); i++) {
      add(out, layer(i, ATTN_NORM), dim);
      if (t.fusedProjections()) {
        add(out, layer(i, WQKV), q + 2 * kv, dim);
      } else {
        add(out, layer(i, WQ), q, dim);
        add(out, layer(i, WK), kv, dim);
        add(out, layer(i, WV), kv, dim);
      }
      if (c.attentionBias()) {
        add(out, layer(i, BQ), q);
        add(out, layer(i, BK), kv);
        add(out, layer(i, BV), kv);
      }
      if (t.qkNorm()) {
        add(out, layer(i, Q_NORM), d);
        add(out, layer(i, K_NORM), d);
      }
      add(out, layer(i, WO), dim, q);
      if (t.sandwichNorms()) add(out, postAttentionNorm(c, i), dim);
      add(out, ffnNorm(c, i), dim);
      if (t.fusedProjections()) {
        add(out, layer(i, W_GATE_UP), 2 * hidden, dim);
      } else {
        add(out, layer(i, W_GATE), hidden, dim);
        add(out, layer(i, W_UP), hidden, dim);
      }
      add(out, layer(i, W_DOWN), dim, hidden);
      if (t.sandwichNorms()) add(out, postFeedForwardNorm(c, i), dim);
    }
    add(out, FINAL_NORM, dim);
    out.add(new Tensor(LM_HEAD, new long[] {vocab, dim}, c.tieWordEmbeddings()));
    return out;
  }

  private static void add(List<Tensor> out, String name, long... shape) {
    out.add(new Tensor(name, shape, false));
  }

  /**
   * Checks that the checkpoint holds every tensor of {@link #of} in its shape (a tied lm_head may be
   * absent); the first that is missing or of another shape is a CheckpointException naming the file
   * and the tensor, as the loaders' own check words it.
   */
  public static void check(Checkpoint ck, ModelConfig c) {
    for (Tensor t : of(c)) {
      if (t.optional() && !ck.has(t.name())) continue;
      ck.infoOfShape(t.name(), t.shape());
    }
  }

  /** What {@link #check} would refuse, every tensor of it, as "name: reason" lines (empty: all present). */
  public static List<String> problems(Checkpoint ck, ModelConfig c) {
    List<String> out = new ArrayList<>();
    for (Tensor t : of(c)) {
      if (!ck.has(t.name())) {
        if (!t.optional()) out.add(t.name() + ": missing");
        continue;
      }
      TensorInfo info = ck.info(t.name());
      if (!java.util.Arrays.equals(info.shape(), t.shape())) {
        out.add(t.name() + ": shape " + info.shapeString() + ", config.json implies " + java.util.Arrays.toString(t.shape()));
      }
    }
    return out;
  }

  /** Parameters of the tensors in the plan (a tied lm_head counted once). */
  public static long parameters(ModelConfig c) {
    long n = 0;
    for (Tensor t : of(c)) {
      if (t.optional()) continue;
      long e = 1;
      for (long s : t.shape()) e *= s;
      n += e;
    }
    return n;
  }
}
