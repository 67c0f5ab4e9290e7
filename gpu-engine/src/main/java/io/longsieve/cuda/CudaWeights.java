package io.longsieve.cuda;

import static io.longsieve.model.WeightNames.*;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Fp8Matrix;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.WeightMatrix;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.FamilyTraits;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.model.TensorPlan;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

/**
 * A decoder's weights on the GPU: matrices bf16 (converted on the host tensor by tensor, in
 * windows, so a checkpoint never sits whole on the heap), norms and biases f32. q/k/v are
 * concatenated into one matrix and gate/up into another, so each is one GEMM (Phi-3 stores them
 * so already). Gemma's norm weights get their 1 added ({@link TensorPlan#normWeight}).
 *
 * <p>q and k are laid out for the kernels' RoPE ({@link QkLayout}): a partial rotary head's
 * elements reordered ({@link Rope#deviceDimOrder}) and YaRN's or LongRoPE's attention factor
 * multiplied into the rotary elements of the q and k rows (their biases, or the q/k norm weights
 * where a per-head norm follows the projection), so that the one rope kernel of every family
 * rotates with a plain table ({@link Rope#deviceInverseFrequencies}). Attention logits and outputs
 * are transformers' own; only the cached keys are stored in that layout. All freed on close.
 *
 * <p>FP8 checkpoints (Checkpoint.fp8): where the engine runs the sm_90a kernels ({@code keepFp8}), a
 * matrix whose parts are all FP8 of one scheme that the FP8 kernels take (Fp8Kernels.fits) stays FP8
 * on the device, its scales beside it ({@link Fp8Matrix}: per-tensor scales repeated per row, 128 x 128
 * block grids stacked). Everywhere else (another GPU, a part kept in bf16 by the checkpoint's ignore
 * list, a layout the kernels do not take, q/k rows that a family's QkLayout reorders or scales, Phi-3's
 * fused tensors) its FP8 parts are dequantized on the host as the CPU does (Fp8Weight.dequantize) and
 * rounded to bf16: the explicit fallback, logged once per load.
 */
public final class CudaWeights implements AutoCloseable {

  public final DeviceBuffer embed;      // (vocab, dim) bf16
  public final Layer[] layers;
  public final DeviceBuffer finalNorm;  // (dim) f32
  public final WeightMatrix lmHead;     // (vocab, dim) bf16 or FP8; bf16 the same buffer as embed when tied
  private final List<DeviceBuffer> owned;

  /** One decoder layer; the families' extra tensors are null where the family has none. */
  public record Layer(
      DeviceBuffer attnNorm,      // (dim) f32
      WeightMatrix wqkv,          // (qDim + 2 * kvDim, dim) bf16 or FP8: rows of wq, then wk, then wv (q, k in QkLayout)
      DeviceBuffer bqkv,          // (qDim + 2 * kvDim) f32, or null without q/k/v bias
      DeviceBuffer qNorm,         // (headDim) f32 per-head RMSNorm of q (Qwen3, Gemma 3), or null
      DeviceBuffer kNorm,         // (headDim) f32 ... of k, or null
      WeightMatrix wo,            // (dim, qDim) bf16 or FP8
      DeviceBuffer postAttnNorm,  // (dim) f32 norm of the attention output (Gemma 3), or null
      DeviceBuffer ffnNorm,       // (dim) f32
      WeightMatrix wgu,           // (2 * hidden, dim) bf16 or FP8: rows of w_gate, then w_up
      WeightMatrix wDown,         // (dim, hidden) bf16 or FP8
      DeviceBuffer postFfnNorm) { // (dim) f32 norm of the MLP output (Gemma 3), or null

    /** A Llama-family layer. */
    public Layer(DeviceBuffer attnNorm, WeightMatrix wqkv, DeviceBuffer bqkv, WeightMatrix wo, DeviceBuffer ffnNorm,
                 WeightMatrix wgu, WeightMatrix wDown) {
      this(attnNorm, wqkv, bqkv, null, null, wo, null, ffnNorm, wgu, wDown, null);
    }
  }

  private CudaWeights(DeviceBuffer embed, Layer[] layers, DeviceBuffer finalNorm, WeightMatrix lmHead,
                      List<DeviceBuffer> owned) {
    this.embed = embed;
    this.layers = layers;
    this.finalNorm = finalNorm;
    this.lmHead = lmHead;
    this.owned = owned;
  }

  /** Bytes of all weights on the device. */
  public long bytes() {
    return owned.stream().mapToLong(DeviceBuffer::bytes).sum();
  }

  /** Uploads a checkpoint with every FP8 weight dequantized to bf16 (any GPU). */
  public static CudaWeights load(CudaContext ctx, Checkpoint ck, ModelConfig c) {
    return load(ctx, ck, c, false);
  }

  /**
   * Uploads a checkpoint, checking every shape against config.json; keepFp8 (the engine runs the
   * sm_90a kernels: Fp8Kernels.supported) keeps the FP8 matrices the FP8 kernels take in FP8.
   */
  public static CudaWeights load(CudaContext ctx, Checkpoint ck, ModelConfig c, boolean keepFp8) {
    List<DeviceBuffer> owned = new ArrayList<>();
    try (WeightUploader up = new WeightUploader(ctx, owned, ck, keepFp8)) {
      long dim = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), hidden = c.intermediateSize(), vocab = c.vocabSize();
      FamilyTraits t = c.traits();
      DeviceBuffer embed = up.bf16("embedding", vocab * dim);
      up.matrix(ck, EMBED, embed, 0, vocab, dim);
      Layer[] layers = new Layer[c.numLayers()];
      for (int i = 0; i < layers.length; i++) {
        QkLayout layout = QkLayout.of(c, i);
        WeightMatrix wqkv;
        if (!t.fusedProjections() && layout.identity()) {
          wqkv = up.weight("wqkv", dim, new String[] {layer(i, WQ), layer(i, WK), layer(i, WV)}, q, kv, kv);
        } else {  // rows the layout moves or scales, or Phi-3's fused tensor: bf16 (an FP8 part dequantized)
          DeviceBuffer b = up.bf16("wqkv", (q + 2 * kv) * dim);
          if (t.fusedProjections() && layout.identity()) {
            up.matrix(ck, layer(i, WQKV), b, 0, q + 2 * kv, dim);       // Phi-3: already q | k | v
          } else if (t.fusedProjections()) {
            float[] qkv = ck.loadF32(layer(i, WQKV), q + 2 * kv, dim);
            layout.rows(qkv, 0, c.numHeads(), (int) dim, !t.qkNorm());
            layout.rows(qkv, (int) (q * dim), c.numKvHeads(), (int) dim, !t.qkNorm());
            up.floats(qkv, b, 0);
          } else {
            up.qkRows(ck, layer(i, WQ), b, 0, c.numHeads(), dim, layout, !t.qkNorm());
            up.qkRows(ck, layer(i, WK), b, q * dim * 2, c.numKvHeads(), dim, layout, !t.qkNorm());
            up.matrix(ck, layer(i, WV), b, (q + kv) * dim * 2, kv, dim);
          }
          wqkv = WeightMatrix.of(b);
        }
        DeviceBuffer bqkv = null;
        if (c.attentionBias()) {
          float[] b = new float[(int) (q + 2 * kv)];
          System.arraycopy(ck.loadF32(layer(i, BQ), q), 0, b, 0, (int) q);
          System.arraycopy(ck.loadF32(layer(i, BK), kv), 0, b, (int) q, (int) kv);
          System.arraycopy(ck.loadF32(layer(i, BV), kv), 0, b, (int) (q + kv), (int) kv);
          layout.rows(b, 0, c.numHeads(), 1, !t.qkNorm());
          layout.rows(b, (int) q, c.numKvHeads(), 1, !t.qkNorm());
          bqkv = up.f32("bqkv", b);
        }
        DeviceBuffer qNorm = null, kNorm = null;
        if (t.qkNorm()) {
          float[] wq = TensorPlan.normWeight(ck, c, layer(i, Q_NORM), c.headDim());
          float[] wk = TensorPlan.normWeight(ck, c, layer(i, K_NORM), c.headDim());
          layout.rows(wq, 0, 1, 1, true);  // the norm is the last step before RoPE: the factor goes here
          layout.rows(wk, 0, 1, 1, true);
          qNorm = up.f32("q_norm", wq);
          kNorm = up.f32("k_norm", wk);
        }
        WeightMatrix wo = up.weight("wo", q, new String[] {layer(i, WO)}, dim);
        WeightMatrix wgu = t.fusedProjections()
            ? up.weight("w_gate_up", dim, new String[] {layer(i, W_GATE_UP)}, 2 * hidden)  // Phi-3: already gate | up
            : up.weight("w_gate_up", dim, new String[] {layer(i, W_GATE), layer(i, W_UP)}, hidden, hidden);
        WeightMatrix wDown = up.weight("w_down", hidden, new String[] {layer(i, W_DOWN)}, dim);
        layers[i] = new Layer(up.f32("attn_norm", TensorPlan.normWeight(ck, c, layer(i, ATTN_NORM), dim)), wqkv, bqkv,
            qNorm, kNorm, wo,
            t.sandwichNorms() ? up.f32("post_attn_norm", TensorPlan.normWeight(ck, c, TensorPlan.postAttentionNorm(c, i), dim)) : null,
            up.f32("ffn_norm", TensorPlan.normWeight(ck, c, TensorPlan.ffnNorm(c, i), dim)), wgu, wDown,
            t.sandwichNorms() ? up.f32("post_ffn_norm", TensorPlan.normWeight(ck, c, TensorPlan.postFeedForwardNorm(c, i), dim)) : null);
      }
      DeviceBuffer norm = up.f32("final_norm", TensorPlan.normWeight(ck, c, FINAL_NORM, dim));
      WeightMatrix head = WeightMatrix.of(embed);
      if (!(c.tieWordEmbeddings() && !ck.has(LM_HEAD))) head = up.weight("lm_head", dim, new String[] {LM_HEAD}, vocab);
      up.logFp8();
      up.keep = true;
      return new CudaWeights(embed, layers, norm, head, owned);
    }
  }

  /** Whether any matrix stayed FP8 on the device (the model then needs an Fp8Kernels). */
  public boolean hasFp8() {
    return matrices().anyMatch(m -> m.fp8() != null);
  }

  /** Widest input (K) of the FP8 matrices: the activation scratch's row length. */
  public long maxFp8Inputs(ModelConfig c) {
    return Math.max(Math.max(c.hiddenSize(), c.qDim()), c.intermediateSize());
  }

  /** Whether some layer's gate/up product cannot fuse its SwiGLU (FP8 block weights): gu then needs every row. */
  public boolean gateUpUnfused() {
    return Arrays.stream(layers).anyMatch(l -> l.wgu().fp8() != null && l.wgu().fp8().block());
  }

  private Stream<WeightMatrix> matrices() {
    return Stream.concat(Arrays.stream(layers)
        .flatMap(l -> Stream.of(l.wqkv(), l.wo(), l.wgu(), l.wDown())), Stream.of(lmHead));
  }

  /**
   * Random weights made on the device (uniform, scaled by 1/sqrt(fan-in)), norms at 1: a model of
   * the config's shapes for benchmarks, with no checkpoint and no host-to-device traffic.
   */
  public static CudaWeights synthetic(CudaContext ctx, Kernels k, ModelConfig c, long seed) {
    List<DeviceBuffer> owned = new ArrayList<>();
    try (WeightUploader up = new WeightUploader(ctx, owned, null, false)) {
      long dim = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), hidden = c.intermediateSize(), vocab = c.vocabSize();
      long[] s = {seed};
      java.util.function.BiFunction<String, long[], DeviceBuffer> rnd = (what, shape) -> {
        DeviceBuffer b = up.bf16(what, shape[0] * shape[1]);
        k.fillRandomBf16(b.ptr(), shape[0] * shape[1], s[0]++, (float) (1.7 / Math.sqrt(shape[1])));
        return b;
      };
      java.util.function.Function<Long, DeviceBuffer> ones = n -> {
        DeviceBuffer b = up.bf16("norm", n * 2);  // f32: 2 bf16 slots per float
        k.fillF32(b.ptr(), n, 1f);
        return b;
      };
      DeviceBuffer embed = rnd.apply("embedding", new long[] {vocab, dim});
      Layer[] layers = new Layer[c.numLayers()];
      for (int i = 0; i < layers.length; i++) {
        layers[i] = new Layer(ones.apply(dim), WeightMatrix.of(rnd.apply("wqkv", new long[] {q + 2 * kv, dim})), null,
            WeightMatrix.of(rnd.apply("wo", new long[] {dim, q})), ones.apply(dim),
            WeightMatrix.of(rnd.apply("w_gate_up", new long[] {2 * hidden, dim})),
            WeightMatrix.of(rnd.apply("w_down", new long[] {dim, hidden})));
      }
      DeviceBuffer norm = ones.apply(dim);
      WeightMatrix head = WeightMatrix.of(c.tieWordEmbeddings() ? embed : rnd.apply("lm_head", new long[] {vocab, dim}));
      up.keep = true;
      return new CudaWeights(embed, layers, norm, head, owned);
    }
  }

  @Override
  public void close() {
    owned.forEach(DeviceBuffer::close);
  }
}
