package io.longsieve.cpu;

import static io.longsieve.model.WeightNames.*;

import io.longsieve.cpu.kernels.PackedMatrix;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.FamilyTraits;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.TensorPlan;
import java.util.Arrays;

/**
 * A decoder's weights widened to fp32 for the CPU reference (the checkpoint itself stays
 * memory-mapped). Every shape is checked against config.json. The projections are packed for
 * {@link io.longsieve.cpu.kernels.Gemm} as they load ({@link PackedMatrix}); the checkpoint layout is
 * not kept on the heap. Phi-3's fused qkv_proj and gate_up_proj are split into their parts here, so the
 * forward pass is the same for every family; Gemma's norm weights, stored as offsets from 1, get their
 * 1 added here (the fp32 sum transformers' Gemma3RMSNorm computes on every call).
 */
public record CpuWeights(
    float[] embed,        // (vocab, dim)
    Layer[] layers,
    float[] finalNorm,    // (dim)
    PackedMatrix lmHead) { // (vocab, dim) packed; from embed when tied

  /**
   * One decoder layer. The q/k/v biases (Qwen2) travel inside their packed matrices; the families'
   * extra norms are null unless the model has them. The MLP is either wGateUp (SwiGLU, the fused
   * epilogue) or wGate and wUp (GeGLU families: Gemma 3), the others null.
   */
  public record Layer(
      float[] attnNorm,      // (dim)
      PackedMatrix wq,       // (nHeads * headDim, dim) packed, + bias (nHeads * headDim) when the model has one
      PackedMatrix wk,       // (nKvHeads * headDim, dim) packed, + bias
      PackedMatrix wv,       // (nKvHeads * headDim, dim) packed, + bias
      float[] qNorm,         // (headDim) RMSNorm weight of each query head (Qwen3, Gemma 3) or null
      float[] kNorm,         // (headDim) ... of each key head, or null
      PackedMatrix wo,       // (dim, nHeads * headDim) packed
      float[] postAttnNorm,  // (dim) norm of the attention output before the residual (Gemma 3) or null
      float[] ffnNorm,       // (dim) norm before the MLP
      PackedMatrix wGateUp,  // gate and up, each (hidden, dim), packed side by side for the fused SwiGLU; or null
      PackedMatrix wGate,    // (hidden, dim) packed, GeGLU families only; else null
      PackedMatrix wUp,      // (hidden, dim) packed, GeGLU families only; else null
      PackedMatrix wDown,    // (dim, hidden) packed
      float[] postFfnNorm) { // (dim) norm of the MLP output before the residual (Gemma 3) or null
  }

  public static CpuWeights load(Checkpoint ck, ModelConfig c) {
    int dim = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), hidden = c.intermediateSize(), vocab = c.vocabSize();
    FamilyTraits t = c.traits();
    float[] embed = ck.loadF32(EMBED, vocab, dim);
    Layer[] layers = new Layer[c.numLayers()];
    for (int i = 0; i < layers.length; i++) {
      float[] wq, wk, wv;
      if (t.fusedProjections()) {
        float[] qkv = ck.loadF32(layer(i, WQKV), q + 2 * kv, dim);  // rows: q, then k, then v
        wq = Arrays.copyOfRange(qkv, 0, q * dim);
        wk = Arrays.copyOfRange(qkv, q * dim, (q + kv) * dim);
        wv = Arrays.copyOfRange(qkv, (q + kv) * dim, qkv.length);
      } else {
        wq = ck.loadF32(layer(i, WQ), q, dim);
        wk = ck.loadF32(layer(i, WK), kv, dim);
        wv = ck.loadF32(layer(i, WV), kv, dim);
      }
      float[] wGate, wUp;
      if (t.fusedProjections()) {
        float[] gu = ck.loadF32(layer(i, W_GATE_UP), 2 * hidden, dim);  // rows: gate, then up
        wGate = Arrays.copyOfRange(gu, 0, hidden * dim);
        wUp = Arrays.copyOfRange(gu, hidden * dim, gu.length);
      } else {
        wGate = ck.loadF32(layer(i, W_GATE), hidden, dim);
        wUp = ck.loadF32(layer(i, W_UP), hidden, dim);
      }
      boolean bias = c.attentionBias(), geglu = t.geglu();
      layers[i] = new Layer(
          norm(ck, c, layer(i, ATTN_NORM), dim),
          PackedMatrix.pack(wq, q, dim, bias ? ck.loadF32(layer(i, BQ), q) : null),
          PackedMatrix.pack(wk, kv, dim, bias ? ck.loadF32(layer(i, BK), kv) : null),
          PackedMatrix.pack(wv, kv, dim, bias ? ck.loadF32(layer(i, BV), kv) : null),
          t.qkNorm() ? norm(ck, c, layer(i, Q_NORM), c.headDim()) : null,
          t.qkNorm() ? norm(ck, c, layer(i, K_NORM), c.headDim()) : null,
          PackedMatrix.pack(ck.loadF32(layer(i, WO), dim, q), dim, q, null),
          t.sandwichNorms() ? norm(ck, c, TensorPlan.postAttentionNorm(c, i), dim) : null,
          norm(ck, c, TensorPlan.ffnNorm(c, i), dim),
          geglu ? null : PackedMatrix.gateUp(wGate, wUp, hidden, dim),
          geglu ? PackedMatrix.pack(wGate, hidden, dim, null) : null,
          geglu ? PackedMatrix.pack(wUp, hidden, dim, null) : null,
          PackedMatrix.pack(ck.loadF32(layer(i, W_DOWN), dim, hidden), dim, hidden, null),
          t.sandwichNorms() ? norm(ck, c, TensorPlan.postFeedForwardNorm(c, i), dim) : null);
    }
    float[] norm = norm(ck, c, FINAL_NORM, dim);
    float[] head = c.tieWordEmbeddings() && !ck.has(LM_HEAD) ? embed : ck.loadF32(LM_HEAD, vocab, dim);
    return new CpuWeights(embed, layers, norm, PackedMatrix.pack(head, vocab, dim, null));
  }

  /** An RMSNorm weight as the forward pass multiplies by it ({@link TensorPlan#normWeight}: 1 + w for Gemma). */
  static float[] norm(Checkpoint ck, ModelConfig c, String name, long n) {
    return TensorPlan.normWeight(ck, c, name, n);
  }
}
