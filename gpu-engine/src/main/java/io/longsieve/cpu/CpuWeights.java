package io.longsieve.cpu;

import static io.longsieve.model.WeightNames.*;

import io.longsieve.model.Checkpoint;
import io.longsieve.model.FamilyTraits;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.TensorPlan;
import java.util.Arrays;

/**
 * A decoder's weights widened to fp32 for the CPU reference, one heap array per tensor (the
 * checkpoint itself stays memory-mapped). Every shape is checked against config.json. Phi-3's fused
 * qkv_proj and gate_up_proj are split into their parts here, so the forward pass is the same for
 * every family; Gemma's norm weights, stored as offsets from 1, get their 1 added here (the fp32 sum
 * transformers' Gemma3RMSNorm computes on every call).
 */
public record CpuWeights(
    float[] embed,      // (vocab, dim)
    Layer[] layers,
    float[] finalNorm,  // (dim)
    float[] lmHead) {   // (vocab, dim); the same array as embed when tied

  /** One decoder layer. Biases are null unless the model has them (Qwen2); so are the families' extra norms. */
  public record Layer(
      float[] attnNorm,      // (dim)
      float[] wq,            // (nHeads * headDim, dim)
      float[] wk,            // (nKvHeads * headDim, dim)
      float[] wv,            // (nKvHeads * headDim, dim)
      float[] bq,            // (nHeads * headDim) or null
      float[] bk,            // (nKvHeads * headDim) or null
      float[] bv,            // (nKvHeads * headDim) or null
      float[] qNorm,         // (headDim) RMSNorm weight of each query head (Qwen3, Gemma 3) or null
      float[] kNorm,         // (headDim) ... of each key head, or null
      float[] wo,            // (dim, nHeads * headDim)
      float[] postAttnNorm,  // (dim) norm of the attention output before the residual (Gemma 3) or null
      float[] ffnNorm,       // (dim) norm before the MLP
      float[] wGate,         // (hidden, dim)
      float[] wUp,           // (hidden, dim)
      float[] wDown,         // (dim, hidden)
      float[] postFfnNorm) { // (dim) norm of the MLP output before the residual (Gemma 3) or null

    /** A Llama-family layer: no q/k norms, no norms after attention or the MLP. */
    public Layer(float[] attnNorm, float[] wq, float[] wk, float[] wv, float[] bq, float[] bk, float[] bv, float[] wo,
                 float[] ffnNorm, float[] wGate, float[] wUp, float[] wDown) {
      this(attnNorm, wq, wk, wv, bq, bk, bv, null, null, wo, null, ffnNorm, wGate, wUp, wDown, null);
    }
  }

  public static CpuWeights load(Checkpoint ck, ModelConfig c) {
    long dim = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), hidden = c.intermediateSize(), vocab = c.vocabSize();
    FamilyTraits t = c.traits();
    float[] embed = ck.loadF32(EMBED, vocab, dim);
    Layer[] layers = new Layer[c.numLayers()];
    for (int i = 0; i < layers.length; i++) {
      float[] wq, wk, wv;
      if (t.fusedProjections()) {
        float[] qkv = ck.loadF32(layer(i, WQKV), q + 2 * kv, dim);  // rows: q, then k, then v
        wq = Arrays.copyOfRange(qkv, 0, (int) (q * dim));
        wk = Arrays.copyOfRange(qkv, (int) (q * dim), (int) ((q + kv) * dim));
        wv = Arrays.copyOfRange(qkv, (int) ((q + kv) * dim), qkv.length);
      } else {
        wq = ck.loadF32(layer(i, WQ), q, dim);
        wk = ck.loadF32(layer(i, WK), kv, dim);
        wv = ck.loadF32(layer(i, WV), kv, dim);
      }
      float[] wGate, wUp;
      if (t.fusedProjections()) {
        float[] gu = ck.loadF32(layer(i, W_GATE_UP), 2 * hidden, dim);  // rows: gate, then up
        wGate = Arrays.copyOfRange(gu, 0, (int) (hidden * dim));
        wUp = Arrays.copyOfRange(gu, (int) (hidden * dim), gu.length);
      } else {
        wGate = ck.loadF32(layer(i, W_GATE), hidden, dim);
        wUp = ck.loadF32(layer(i, W_UP), hidden, dim);
      }
      layers[i] = new Layer(
          norm(ck, c, layer(i, ATTN_NORM), dim), wq, wk, wv,
          c.attentionBias() ? ck.loadF32(layer(i, BQ), q) : null,
          c.attentionBias() ? ck.loadF32(layer(i, BK), kv) : null,
          c.attentionBias() ? ck.loadF32(layer(i, BV), kv) : null,
          t.qkNorm() ? norm(ck, c, layer(i, Q_NORM), c.headDim()) : null,
          t.qkNorm() ? norm(ck, c, layer(i, K_NORM), c.headDim()) : null,
          ck.loadF32(layer(i, WO), dim, q),
          t.sandwichNorms() ? norm(ck, c, TensorPlan.postAttentionNorm(c, i), dim) : null,
          norm(ck, c, TensorPlan.ffnNorm(c, i), dim),
          wGate, wUp,
          ck.loadF32(layer(i, W_DOWN), dim, hidden),
          t.sandwichNorms() ? norm(ck, c, TensorPlan.postFeedForwardNorm(c, i), dim) : null);
    }
    float[] norm = norm(ck, c, FINAL_NORM, dim);
    float[] head = c.tieWordEmbeddings() && !ck.has(LM_HEAD) ? embed : ck.loadF32(LM_HEAD, vocab, dim);
    return new CpuWeights(embed, layers, norm, head);
  }

  /** An RMSNorm weight as the forward pass multiplies by it ({@link TensorPlan#normWeight}: 1 + w for Gemma). */
  static float[] norm(Checkpoint ck, ModelConfig c, String name, long n) {
    return TensorPlan.normWeight(ck, c, name, n);
  }
}
