package io.longsieve.cpu;

import static io.longsieve.model.WeightNames.*;

import io.longsieve.cpu.kernels.PackedMatrix;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;

/**
 * A Llama-family decoder's weights widened to fp32 for the CPU reference, one heap array per
 * tensor (the checkpoint itself stays memory-mapped). Every shape is checked against config.json.
 * The projections are packed for {@link io.longsieve.cpu.kernels.Gemm} as they load ({@link PackedMatrix}); the checkpoint
 * layout is not kept on the heap.
 */
public record CpuWeights(
    float[] embed,        // (vocab, dim)
    Layer[] layers,
    float[] finalNorm,    // (dim)
    PackedMatrix lmHead) { // (vocab, dim) packed; from embed when tied

  /** One decoder layer. The q/k/v biases (Qwen2) travel inside their packed matrices. */
  public record Layer(
      float[] attnNorm,      // (dim)
      PackedMatrix wq,       // (nHeads * headDim, dim) packed, + bias (nHeads * headDim) when the model has one
      PackedMatrix wk,       // (nKvHeads * headDim, dim) packed, + bias
      PackedMatrix wv,       // (nKvHeads * headDim, dim) packed, + bias
      PackedMatrix wo,       // (dim, nHeads * headDim) packed
      float[] ffnNorm,       // (dim)
      PackedMatrix wGateUp,  // gate and up, each (hidden, dim), packed side by side for the fused SwiGLU
      PackedMatrix wDown) {} // (dim, hidden) packed

  public static CpuWeights load(Checkpoint ck, ModelConfig c) {
    int dim = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), hidden = c.intermediateSize(), vocab = c.vocabSize();
    float[] embed = ck.loadF32(EMBED, vocab, dim);
    Layer[] layers = new Layer[c.numLayers()];
    for (int i = 0; i < layers.length; i++) {
      boolean bias = c.attentionBias();
      layers[i] = new Layer(
          ck.loadF32(layer(i, ATTN_NORM), dim),
          PackedMatrix.pack(ck.loadF32(layer(i, WQ), q, dim), q, dim, bias ? ck.loadF32(layer(i, BQ), q) : null),
          PackedMatrix.pack(ck.loadF32(layer(i, WK), kv, dim), kv, dim, bias ? ck.loadF32(layer(i, BK), kv) : null),
          PackedMatrix.pack(ck.loadF32(layer(i, WV), kv, dim), kv, dim, bias ? ck.loadF32(layer(i, BV), kv) : null),
          PackedMatrix.pack(ck.loadF32(layer(i, WO), dim, q), dim, q, null),
          ck.loadF32(layer(i, FFN_NORM), dim),
          PackedMatrix.gateUp(ck.loadF32(layer(i, W_GATE), hidden, dim), ck.loadF32(layer(i, W_UP), hidden, dim), hidden,
              dim),
          PackedMatrix.pack(ck.loadF32(layer(i, W_DOWN), dim, hidden), dim, hidden, null));
    }
    float[] norm = ck.loadF32(FINAL_NORM, dim);
    float[] head = c.tieWordEmbeddings() && !ck.has(LM_HEAD) ? embed : ck.loadF32(LM_HEAD, vocab, dim);
    return new CpuWeights(embed, layers, norm, PackedMatrix.pack(head, vocab, dim, null));
  }
}
