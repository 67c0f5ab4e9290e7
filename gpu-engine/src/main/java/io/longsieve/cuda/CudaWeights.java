package io.longsieve.cuda;

import static io.longsieve.model.WeightNames.*;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Fp8Matrix;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.WeightMatrix;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

/**
 * A Llama-family decoder's weights on the GPU: matrices bf16 (converted on the host tensor by
 * tensor, in windows, so a checkpoint never sits whole on the heap), norms and biases f32. q/k/v
 * are concatenated into one matrix and gate/up into another, so each is one GEMM. All freed on close.
 *
 * <p>FP8 checkpoints (Checkpoint.fp8): where the engine runs the sm_90a kernels ({@code keepFp8}), a
 * matrix whose parts are all FP8 of one scheme that the FP8 kernels take (Fp8Kernels.fits) stays FP8
 * on the device, its scales beside it ({@link Fp8Matrix}: per-tensor scales repeated per row, 128 x 128
 * block grids stacked). Everywhere else (another GPU, a part kept in bf16 by the checkpoint's ignore
 * list, a layout the kernels do not take) its FP8 parts are dequantized on the host as the CPU does
 * (Fp8Weight.dequantize) and rounded to bf16: the explicit fallback, logged once per load.
 */
public final class CudaWeights implements AutoCloseable {

  public final DeviceBuffer embed;      // (vocab, dim) bf16
  public final Layer[] layers;
  public final DeviceBuffer finalNorm;  // (dim) f32
  public final WeightMatrix lmHead;     // (vocab, dim) bf16 or FP8; bf16 the same buffer as embed when tied
  private final List<DeviceBuffer> owned;

  /** One decoder layer. */
  public record Layer(
      DeviceBuffer attnNorm,  // (dim) f32
      WeightMatrix wqkv,      // (qDim + 2 * kvDim, dim) bf16 or FP8: rows of wq, then wk, then wv
      DeviceBuffer bqkv,      // (qDim + 2 * kvDim) f32, or null without q/k/v bias
      WeightMatrix wo,        // (dim, qDim) bf16 or FP8
      DeviceBuffer ffnNorm,   // (dim) f32
      WeightMatrix wgu,       // (2 * hidden, dim) bf16 or FP8: rows of w_gate, then w_up
      WeightMatrix wDown) {}  // (dim, hidden) bf16 or FP8

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
      DeviceBuffer embed = up.bf16("embedding", vocab * dim);
      up.matrix(ck, EMBED, embed, 0, vocab, dim);
      Layer[] layers = new Layer[c.numLayers()];
      for (int i = 0; i < layers.length; i++) {
        WeightMatrix wqkv = up.weight("wqkv", dim, new String[] {layer(i, WQ), layer(i, WK), layer(i, WV)}, q, kv, kv);
        DeviceBuffer bqkv = null;
        if (c.attentionBias()) {
          float[] b = new float[(int) (q + 2 * kv)];
          System.arraycopy(ck.loadF32(layer(i, BQ), q), 0, b, 0, (int) q);
          System.arraycopy(ck.loadF32(layer(i, BK), kv), 0, b, (int) q, (int) kv);
          System.arraycopy(ck.loadF32(layer(i, BV), kv), 0, b, (int) (q + kv), (int) kv);
          bqkv = up.f32("bqkv", b);
        }
        WeightMatrix wo = up.weight("wo", q, new String[] {layer(i, WO)}, dim);
        WeightMatrix wgu = up.weight("w_gate_up", dim, new String[] {layer(i, W_GATE), layer(i, W_UP)}, hidden, hidden);
        WeightMatrix wDown = up.weight("w_down", hidden, new String[] {layer(i, W_DOWN)}, dim);
        layers[i] = new Layer(up.f32("attn_norm", ck.loadF32(layer(i, ATTN_NORM), dim)), wqkv, bqkv, wo,
            up.f32("ffn_norm", ck.loadF32(layer(i, FFN_NORM), dim)), wgu, wDown);
      }
      DeviceBuffer norm = up.f32("final_norm", ck.loadF32(FINAL_NORM, dim));
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
