package io.longsieve.cuda;

import static io.longsieve.model.WeightNames.*;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.CheckpointException;
import io.longsieve.model.DType;
import io.longsieve.model.FamilyTraits;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import io.longsieve.model.TensorInfo;
import io.longsieve.model.TensorPlan;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import jcuda.Pointer;
import jcuda.driver.JCudaDriver;

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
 */
public final class CudaWeights implements AutoCloseable {

  public final DeviceBuffer embed;      // (vocab, dim) bf16
  public final Layer[] layers;
  public final DeviceBuffer finalNorm;  // (dim) f32
  public final DeviceBuffer lmHead;     // (vocab, dim) bf16; the same buffer as embed when tied
  private final List<DeviceBuffer> owned;

  /** One decoder layer; the families' extra tensors are null where the family has none. */
  public record Layer(
      DeviceBuffer attnNorm,      // (dim) f32
      DeviceBuffer wqkv,          // (qDim + 2 * kvDim, dim) bf16: rows of wq, then wk, then wv (q, k in QkLayout)
      DeviceBuffer bqkv,          // (qDim + 2 * kvDim) f32, or null without q/k/v bias
      DeviceBuffer qNorm,         // (headDim) f32 per-head RMSNorm of q (Qwen3, Gemma 3), or null
      DeviceBuffer kNorm,         // (headDim) f32 ... of k, or null
      DeviceBuffer wo,            // (dim, qDim) bf16
      DeviceBuffer postAttnNorm,  // (dim) f32 norm of the attention output (Gemma 3), or null
      DeviceBuffer ffnNorm,       // (dim) f32
      DeviceBuffer wgu,           // (2 * hidden, dim) bf16: rows of w_gate, then w_up
      DeviceBuffer wDown,         // (dim, hidden) bf16
      DeviceBuffer postFfnNorm) { // (dim) f32 norm of the MLP output (Gemma 3), or null

    /** A Llama-family layer. */
    public Layer(DeviceBuffer attnNorm, DeviceBuffer wqkv, DeviceBuffer bqkv, DeviceBuffer wo, DeviceBuffer ffnNorm,
                 DeviceBuffer wgu, DeviceBuffer wDown) {
      this(attnNorm, wqkv, bqkv, null, null, wo, null, ffnNorm, wgu, wDown, null);
    }
  }

  private CudaWeights(DeviceBuffer embed, Layer[] layers, DeviceBuffer finalNorm, DeviceBuffer lmHead,
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

  /** Uploads a checkpoint, checking every shape against config.json (TensorPlan's names and shapes). */
  public static CudaWeights load(CudaContext ctx, Checkpoint ck, ModelConfig c) {
    List<DeviceBuffer> owned = new ArrayList<>();
    try (Uploader up = new Uploader(ctx, owned)) {
      long dim = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), hidden = c.intermediateSize(), vocab = c.vocabSize();
      FamilyTraits t = c.traits();
      DeviceBuffer embed = up.bf16("embedding", vocab * dim);
      up.matrix(ck, EMBED, embed, 0, vocab, dim);
      Layer[] layers = new Layer[c.numLayers()];
      for (int i = 0; i < layers.length; i++) {
        QkLayout layout = QkLayout.of(c, i);
        DeviceBuffer wqkv = up.bf16("wqkv", (q + 2 * kv) * dim);
        if (t.fusedProjections() && layout.identity()) {
          up.matrix(ck, layer(i, WQKV), wqkv, 0, q + 2 * kv, dim);       // Phi-3: already q | k | v
        } else if (t.fusedProjections()) {
          float[] qkv = ck.loadF32(layer(i, WQKV), q + 2 * kv, dim);
          layout.rows(qkv, 0, c.numHeads(), (int) dim, !t.qkNorm());
          layout.rows(qkv, (int) (q * dim), c.numKvHeads(), (int) dim, !t.qkNorm());
          up.floats(qkv, wqkv, 0);
        } else {
          up.qkRows(ck, layer(i, WQ), wqkv, 0, c.numHeads(), dim, layout, !t.qkNorm());
          up.qkRows(ck, layer(i, WK), wqkv, q * dim * 2, c.numKvHeads(), dim, layout, !t.qkNorm());
          up.matrix(ck, layer(i, WV), wqkv, (q + kv) * dim * 2, kv, dim);
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
        DeviceBuffer wo = up.bf16("wo", dim * q);
        up.matrix(ck, layer(i, WO), wo, 0, dim, q);
        DeviceBuffer wgu = up.bf16("w_gate_up", 2 * hidden * dim);
        if (t.fusedProjections()) {
          up.matrix(ck, layer(i, W_GATE_UP), wgu, 0, 2 * hidden, dim);  // Phi-3: already gate | up
        } else {
          up.matrix(ck, layer(i, W_GATE), wgu, 0, hidden, dim);
          up.matrix(ck, layer(i, W_UP), wgu, hidden * dim * 2, hidden, dim);
        }
        DeviceBuffer wDown = up.bf16("w_down", dim * hidden);
        up.matrix(ck, layer(i, W_DOWN), wDown, 0, dim, hidden);
        layers[i] = new Layer(up.f32("attn_norm", TensorPlan.normWeight(ck, c, layer(i, ATTN_NORM), dim)), wqkv, bqkv,
            qNorm, kNorm, wo,
            t.sandwichNorms() ? up.f32("post_attn_norm", TensorPlan.normWeight(ck, c, TensorPlan.postAttentionNorm(c, i), dim)) : null,
            up.f32("ffn_norm", TensorPlan.normWeight(ck, c, TensorPlan.ffnNorm(c, i), dim)), wgu, wDown,
            t.sandwichNorms() ? up.f32("post_ffn_norm", TensorPlan.normWeight(ck, c, TensorPlan.postFeedForwardNorm(c, i), dim)) : null);
      }
      DeviceBuffer norm = up.f32("final_norm", TensorPlan.normWeight(ck, c, FINAL_NORM, dim));
      DeviceBuffer head = embed;
      if (!(c.tieWordEmbeddings() && !ck.has(LM_HEAD))) {
        head = up.bf16("lm_head", vocab * dim);
        up.matrix(ck, LM_HEAD, head, 0, vocab, dim);
      }
      up.keep = true;
      return new CudaWeights(embed, layers, norm, head, owned);
    }
  }

  /**
   * Random weights made on the device (uniform, scaled by 1/sqrt(fan-in)), norms at 1: a model of
   * the config's shapes for benchmarks, with no checkpoint and no host-to-device traffic.
   */
  public static CudaWeights synthetic(CudaContext ctx, Kernels k, ModelConfig c, long seed) {
    List<DeviceBuffer> owned = new ArrayList<>();
    try (Uploader up = new Uploader(ctx, owned)) {
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
        layers[i] = new Layer(ones.apply(dim), rnd.apply("wqkv", new long[] {q + 2 * kv, dim}), null,
            rnd.apply("wo", new long[] {dim, q}), ones.apply(dim), rnd.apply("w_gate_up", new long[] {2 * hidden, dim}),
            rnd.apply("w_down", new long[] {dim, hidden}));
      }
      DeviceBuffer norm = ones.apply(dim);
      DeviceBuffer head = c.tieWordEmbeddings() ? embed : rnd.apply("lm_head", new long[] {vocab, dim});
      up.keep = true;
      return new CudaWeights(embed, layers, norm, head, owned);
    }
  }

  @Override
  public void close() {
    owned.forEach(DeviceBuffer::close);
  }

  /** Allocation and host→device conversion; frees what it allocated unless {@link #keep} is set. */
  private static final class Uploader implements AutoCloseable {
    private static final int WINDOW = 32 << 20;  // elements per conversion window
    private final CudaContext ctx;
    private final List<DeviceBuffer> owned;
    private ByteBuffer staging;                  // (WINDOW) bf16, direct
    boolean keep;

    Uploader(CudaContext ctx, List<DeviceBuffer> owned) {
      this.ctx = ctx;
      this.owned = owned;
    }

    DeviceBuffer bf16(String what, long elements) {
      DeviceBuffer b = ctx.alloc(elements * 2, what);
      owned.add(b);
      return b;
    }

    DeviceBuffer f32(String what, float[] v) {
      DeviceBuffer b = ctx.alloc(v.length * 4L, what);
      owned.add(b);
      b.upload(v);
      return b;
    }

    /** The q or k rows (heads × headDim, dim) of tensor `name` in the device layout, as bf16 into dst at byte offset dstOff. */
    void qkRows(Checkpoint ck, String name, DeviceBuffer dst, long dstOff, int heads, long cols, QkLayout layout,
                boolean scale) {
      if (layout.identity()) {
        matrix(ck, name, dst, dstOff, (long) heads * layout.headDim(), cols);
        return;
      }
      float[] w = ck.loadF32(name, (long) heads * layout.headDim(), cols);
      layout.rows(w, 0, heads, (int) cols, scale);
      floats(w, dst, dstOff);
    }

    /** Copies v (f32) as bf16 into dst at byte offset dstOff. */
    void floats(float[] v, DeviceBuffer dst, long dstOff) {
      if (staging == null) staging = ByteBuffer.allocateDirect(WINDOW * 2).order(ByteOrder.LITTLE_ENDIAN);
      for (int done = 0; done < v.length; done += WINDOW) {
        int m = Math.min(WINDOW, v.length - done);
        staging.clear();
        for (int i = 0; i < m; i++) staging.putShort(i * 2, DType.floatToBf16(v[done + i]));
        ctx.makeCurrent();
        JCudaDriver.cuMemcpyHtoD(dst.at(dstOff + (long) done * 2), Pointer.to(staging), (long) m * 2);
      }
    }

    /** Copies tensor `name` of shape (rows, cols) as bf16 into dst at byte offset dstOff. */
    void matrix(Checkpoint ck, String name, DeviceBuffer dst, long dstOff, long rows, long cols) {
      TensorInfo t = ck.infoOfShape(name, rows, cols);
      long n = t.numel();
      int elem = t.dtype().bytes;
      try (FileChannel ch = FileChannel.open(t.file(), StandardOpenOption.READ)) {
        for (long done = 0; done < n; done += WINDOW) {
          int m = (int) Math.min(WINDOW, n - done);
          MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_ONLY, t.start() + done * elem, (long) m * elem);
          map.order(ByteOrder.LITTLE_ENDIAN);
          ByteBuffer src;
          if (t.dtype() == DType.BF16) {
            src = map;
          } else {
            if (staging == null) staging = ByteBuffer.allocateDirect(WINDOW * 2).order(ByteOrder.LITTLE_ENDIAN);
            staging.clear();
            for (int i = 0; i < m; i++) {
              float f = t.dtype() == DType.F32 ? map.getFloat(i * 4) : halfToFloat(map.getShort(i * 2));
              staging.putShort(i * 2, DType.floatToBf16(f));
            }
            src = staging;
          }
          ctx.makeCurrent();
          JCudaDriver.cuMemcpyHtoD(dst.at(dstOff + done * 2), Pointer.to(src), (long) m * 2);
        }
      } catch (IOException e) {
        throw new CheckpointException(t.file() + ": cannot read tensor '" + name + "': " + e.getMessage(), e);
      }
    }

    private static float halfToFloat(short half) {
      int h = half & 0xffff, sign = (h & 0x8000) << 16, exp = (h >>> 10) & 0x1f, mant = h & 0x3ff;
      if (exp == 0x1f) return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
      if (exp == 0) return (sign == 0 ? 1 : -1) * mant * 0x1p-24f;
      return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
    }

    @Override
    public void close() {
      if (!keep) owned.forEach(DeviceBuffer::close);
    }
  }
}
