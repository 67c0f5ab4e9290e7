package io.longsieve.cpu;

import static io.longsieve.model.WeightNames.*;

import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;

/**
 * A Llama-family decoder's weights widened to fp32 for the CPU reference, one heap array per
 * tensor (the checkpoint itself stays memory-mapped). Every shape is checked against config.json.
 */
public record CpuWeights(
    float[] embed,      // (vocab, dim)
    Layer[] layers,
    float[] finalNorm,  // (dim)
    float[] lmHead) {   // (vocab, dim); the same array as embed when tied

  /** One decoder layer. Biases are null unless the model has them (Qwen2). */
  public record Layer(
      float[] attnNorm,  // (dim)
      float[] wq,        // (nHeads * headDim, dim)
      float[] wk,        // (nKvHeads * headDim, dim)
      float[] wv,        // (nKvHeads * headDim, dim)
      float[] bq,        // (nHeads * headDim) or null
      float[] bk,        // (nKvHeads * headDim) or null
      float[] bv,        // (nKvHeads * headDim) or null
      float[] wo,        // (dim, nHeads * headDim)
      float[] ffnNorm,   // (dim)
      float[] wGate,     // (hidden, dim)
      float[] wUp,       // (hidden, dim)
      float[] wDown) {}  // (dim, hidden)

  public static CpuWeights load(Checkpoint ck, ModelConfig c) {
    long dim = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), hidden = c.intermediateSize(), vocab = c.vocabSize();
    float[] embed = ck.loadF32(EMBED, vocab, dim);
    Layer[] layers = new Layer[c.numLayers()];
    for (int i = 0; i < layers.length; i++) {
      layers[i] = new Layer(
          ck.loadF32(layer(i, ATTN_NORM), dim),
          ck.loadF32(layer(i, WQ), q, dim),
          ck.loadF32(layer(i, WK), kv, dim),
          ck.loadF32(layer(i, WV), kv, dim),
          c.attentionBias() ? ck.loadF32(layer(i, BQ), q) : null,
          c.attentionBias() ? ck.loadF32(layer(i, BK), kv) : null,
          c.attentionBias() ? ck.loadF32(layer(i, BV), kv) : null,
          ck.loadF32(layer(i, WO), dim, q),
          ck.loadF32(layer(i, FFN_NORM), dim),
          ck.loadF32(layer(i, W_GATE), hidden, dim),
          ck.loadF32(layer(i, W_UP), hidden, dim),
          ck.loadF32(layer(i, W_DOWN), dim, hidden));
    }
    float[] norm = ck.loadF32(FINAL_NORM, dim);
    float[] head = c.tieWordEmbeddings() && !ck.has(LM_HEAD) ? embed : ck.loadF32(LM_HEAD, vocab, dim);
    return new CpuWeights(embed, layers, norm, head);
  }
}
