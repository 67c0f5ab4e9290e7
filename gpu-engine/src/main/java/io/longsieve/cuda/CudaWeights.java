package io.longsieve.cuda;

import static io.longsieve.model.WeightNames.*;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.CheckpointException;
import io.longsieve.model.DType;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.TensorInfo;
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
 * A Llama-family decoder's weights on the GPU: matrices bf16 (converted on the host tensor by
 * tensor, in windows, so a checkpoint never sits whole on the heap), norms and biases f32. q/k/v
 * are concatenated into one matrix and gate/up into another, so each is one GEMM. All freed on close.
 */
public final class CudaWeights implements AutoCloseable {

  public final DeviceBuffer embed;      // (vocab, dim) bf16
  public final Layer[] layers;
  public final DeviceBuffer finalNorm;  // (dim) f32
  public final DeviceBuffer lmHead;     // (vocab, dim) bf16; the same buffer as embed when tied
  private final List<DeviceBuffer> owned;

  /** One decoder layer. */
  public record Layer(
      DeviceBuffer attnNorm,  // (dim) f32
      DeviceBuffer wqkv,      // (qDim + 2 * kvDim, dim) bf16: rows of wq, then wk, then wv
      DeviceBuffer bqkv,      // (qDim + 2 * kvDim) f32, or null without q/k/v bias
      DeviceBuffer wo,        // (dim, qDim) bf16
      DeviceBuffer ffnNorm,   // (dim) f32
      DeviceBuffer wgu,       // (2 * hidden, dim) bf16: rows of w_gate, then w_up
      DeviceBuffer wDown) {}  // (dim, hidden) bf16

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

  /** Uploads a checkpoint, checking every shape against config.json. */
  public static CudaWeights load(CudaContext ctx, Checkpoint ck, ModelConfig c) {
    if (!c.traits().equals(io.longsieve.model.FamilyTraits.llama(c.headDim())) || c.rotaryDim() != c.headDim()
        || c.layerKinds().stream().anyMatch(k -> !k.ropeScaling().type().equals("default") && !k.ropeScaling().isLlama3())) {
      throw new IllegalStateException("the CUDA backend does not run " + c.modelType() + " with " + c.ropeScaling().describe()
          + " RoPE yet; use --device cpu");
    }
    List<DeviceBuffer> owned = new ArrayList<>();
    try (Uploader up = new Uploader(ctx, owned)) {
      long dim = c.hiddenSize(), q = c.qDim(), kv = c.kvDim(), hidden = c.intermediateSize(), vocab = c.vocabSize();
      DeviceBuffer embed = up.bf16("embedding", vocab * dim);
      up.matrix(ck, EMBED, embed, 0, vocab, dim);
      Layer[] layers = new Layer[c.numLayers()];
      for (int i = 0; i < layers.length; i++) {
        DeviceBuffer wqkv = up.bf16("wqkv", (q + 2 * kv) * dim);
        up.matrix(ck, layer(i, WQ), wqkv, 0, q, dim);
        up.matrix(ck, layer(i, WK), wqkv, q * dim * 2, kv, dim);
        up.matrix(ck, layer(i, WV), wqkv, (q + kv) * dim * 2, kv, dim);
        DeviceBuffer bqkv = null;
        if (c.attentionBias()) {
          float[] b = new float[(int) (q + 2 * kv)];
          System.arraycopy(ck.loadF32(layer(i, BQ), q), 0, b, 0, (int) q);
          System.arraycopy(ck.loadF32(layer(i, BK), kv), 0, b, (int) q, (int) kv);
          System.arraycopy(ck.loadF32(layer(i, BV), kv), 0, b, (int) (q + kv), (int) kv);
          bqkv = up.f32("bqkv", b);
        }
        DeviceBuffer wo = up.bf16("wo", dim * q);
        up.matrix(ck, layer(i, WO), wo, 0, dim, q);
        DeviceBuffer wgu = up.bf16("w_gate_up", 2 * hidden * dim);
        up.matrix(ck, layer(i, W_GATE), wgu, 0, hidden, dim);
        up.matrix(ck, layer(i, W_UP), wgu, hidden * dim * 2, hidden, dim);
        DeviceBuffer wDown = up.bf16("w_down", dim * hidden);
        up.matrix(ck, layer(i, W_DOWN), wDown, 0, dim, hidden);
        layers[i] = new Layer(up.f32("attn_norm", ck.loadF32(layer(i, ATTN_NORM), dim)), wqkv, bqkv, wo,
            up.f32("ffn_norm", ck.loadF32(layer(i, FFN_NORM), dim)), wgu, wDown);
      }
      DeviceBuffer norm = up.f32("final_norm", ck.loadF32(FINAL_NORM, dim));
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
