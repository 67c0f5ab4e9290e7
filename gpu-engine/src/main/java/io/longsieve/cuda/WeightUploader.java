package io.longsieve.cuda;

import io.longsieve.cuda.driver.CaptureGuard;
import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Fp8Kernels;
import io.longsieve.cuda.kernels.Fp8Matrix;
import io.longsieve.cuda.kernels.WeightMatrix;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.CheckpointException;
import io.longsieve.model.DType;
import io.longsieve.model.Fp8Weight;
import io.longsieve.model.QuantizationConfig.Activations;
import io.longsieve.model.QuantizationConfig.Granularity;
import io.longsieve.model.QuantizationConfig.Scheme;
import io.longsieve.model.TensorInfo;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Logger;
import jcuda.Pointer;
import jcuda.driver.JCudaDriver;

/**
 * CudaWeights' allocation and host-to-device copies: bf16 matrices converted window by window (a
 * checkpoint never sits whole on the heap), FP8 matrices copied as bytes with their scales, or
 * dequantized to bf16 where they cannot stay FP8 (see CudaWeights). Frees what it allocated unless
 * {@link #keep} is set.
 */
final class WeightUploader implements AutoCloseable {

  private static final Logger LOG = Logger.getLogger(WeightUploader.class.getName());
  private static final int WINDOW = 32 << 20;  // elements per conversion window

  private final CudaContext ctx;
  private final List<DeviceBuffer> owned;
  private final Checkpoint ck;
  private final boolean keepFp8;
  private ByteBuffer staging;                  // (WINDOW) bf16, direct
  private final List<String> dequantized = new ArrayList<>();  // FP8 matrices uploaded as bf16, and why
  private int keptFp8;
  boolean keep;

  WeightUploader(CudaContext ctx, List<DeviceBuffer> owned, Checkpoint ck, boolean keepFp8) {
    this.ctx = ctx;
    this.owned = owned;
    this.ck = ck;
    this.keepFp8 = keepFp8;
  }

  DeviceBuffer bf16(String what, long elements) {
    return alloc(elements * 2, what);
  }

  private DeviceBuffer alloc(long bytes, String what) {
    DeviceBuffer b = ctx.alloc(bytes, what);
    owned.add(b);
    return b;
  }

  DeviceBuffer f32(String what, float[] v) {
    DeviceBuffer b = alloc(v.length * 4L, what);
    b.upload(v);
    return b;
  }

  /**
   * The matrix of tensors {@code names} (rows[i], cols) stacked by rows: FP8 when every part is FP8 of
   * one scheme the FP8 kernels take and keepFp8 is set, else bf16.
   */
  WeightMatrix weight(String what, long cols, String[] names, long... rows) {
    long total = 0;
    Fp8Weight[] parts = new Fp8Weight[names.length];
    boolean allFp8 = true, anyFp8 = false;
    for (int i = 0; i < names.length; i++) {
      TensorInfo t = ck.infoOfShape(names[i], rows[i], cols);
      total += rows[i];
      if (t.dtype() == DType.F8_E4M3) {
        parts[i] = ck.fp8(names[i]);
        anyFp8 = true;
      } else {
        allFp8 = false;
      }
    }
    String why = !anyFp8 ? null : !keepFp8 ? "this GPU does not run the sm_90a FP8 kernels" : fp8Misfit(parts, cols, rows);
    if (anyFp8 && why == null) {
      keptFp8++;
      return WeightMatrix.of(fp8(what, parts, total, cols));
    }
    if (anyFp8) dequantized.add(what + " (" + names[0] + (names.length > 1 ? ", ..." : "") + "): " + why);
    DeviceBuffer b = bf16(what, total * cols);
    long row = 0;
    for (int i = 0; i < names.length; i++) {
      matrix(ck, names[i], b, row * cols * 2, rows[i], cols);
      row += rows[i];
    }
    return WeightMatrix.of(b);
  }

  /** Why parts cannot stay FP8 together, or null. */
  private static String fp8Misfit(Fp8Weight[] parts, long cols, long[] rows) {
    for (Fp8Weight p : parts) if (p == null) return "the checkpoint keeps some of its parts in high precision";
    Scheme s = parts[0].scheme();
    boolean block = s.granularity() == Granularity.BLOCK;
    for (Fp8Weight p : parts) {
      Scheme o = p.scheme();
      if ((o.granularity() == Granularity.BLOCK) != block || o.activations() != s.activations()
          || o.blockRows() != s.blockRows() || o.blockCols() != s.blockCols()) {
        return "its parts are quantized differently (" + s + "; " + o + ")";
      }
    }
    if (!Fp8Kernels.fits(block, s.blockRows(), s.blockCols(), s.activations(), cols, rows)) {
      return "the FP8 kernels do not take " + s + " at K " + cols + " (128 x 128 blocks over 128-row parts, K % 16 == 0,"
          + " no per-group activations with per-row weights)";
    }
    return null;
  }

  private Fp8Matrix fp8(String what, Fp8Weight[] parts, long rows, long cols) {
    boolean block = parts[0].scheme().granularity() == Granularity.BLOCK;
    DeviceBuffer values = alloc(rows * cols, what + " fp8");
    long kb = (cols + Fp8Kernels.GROUP - 1) / Fp8Kernels.GROUP;
    float[] scales = new float[(int) (block ? rows / Fp8Kernels.GROUP * kb : rows)];
    long row = 0;
    float inputScale = 0;
    for (Fp8Weight p : parts) {
      bytes(p.weight(), values, row * cols);
      float[] s = finite(ck.readAll(p.scale()), p.scale());
      if (block) System.arraycopy(s, 0, scales, (int) (row / Fp8Kernels.GROUP * kb), s.length);
      else for (int r = 0; r < p.rows(); r++) scales[(int) (row + r)] = s[s.length == 1 ? 0 : r];
      if (p.inputScale() != null) {
        // the parts share their input: quantizing it with the largest of their scales clips none (vLLM does so too)
        float in = finite(ck.readAll(p.inputScale()), p.inputScale())[0];
        if (!(in > 0)) throw new CheckpointException(p.inputScale().file() + ": input scale '" + p.inputScale().name() + "' is " + in);
        inputScale = Math.max(inputScale, in);
      }
      row += p.rows();
    }
    Activations act = parts[0].scheme().activations();
    DeviceBuffer in = act == Activations.STATIC_TENSOR ? f32(what + " input scale", new float[] {inputScale}) : null;
    return new Fp8Matrix(values, f32(what + " scales", scales), block, act, in);
  }

  private static float[] finite(float[] v, TensorInfo t) {
    for (float x : v) if (!Float.isFinite(x)) throw new CheckpointException(t.file() + ": scale '" + t.name() + "' holds " + x);
    return v;
  }

  /** Copies tensor t's bytes as they are into dst at byte offset dstOff. */
  private void bytes(TensorInfo t, DeviceBuffer dst, long dstOff) {
    long n = t.end() - t.start();
    try (FileChannel ch = FileChannel.open(t.file(), StandardOpenOption.READ)) {
      for (long done = 0; done < n; done += WINDOW) {
        int m = (int) Math.min(WINDOW, n - done);
        MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_ONLY, t.start() + done, m);
        ctx.makeCurrent();
        try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {  // another engine may capture
          JCudaDriver.cuMemcpyHtoD(dst.at(dstOff + done), Pointer.to(map), m);
        }
      }
    } catch (IOException e) {
      throw new CheckpointException(t.file() + ": cannot read tensor '" + t.name() + "': " + e.getMessage(), e);
    }
  }

  /**
   * Copies tensor `name` of shape (rows, cols) as bf16 into dst at byte offset dstOff; an FP8 tensor
   * dequantized as the CPU reference does (Fp8Weight.dequantize), then rounded to bf16.
   */
  void matrix(Checkpoint ck, String name, DeviceBuffer dst, long dstOff, long rows, long cols) {
    TensorInfo t = ck.infoOfShape(name, rows, cols);
    Fp8Weight f = t.dtype() == DType.F8_E4M3 ? ck.fp8(name) : null;
    float[] scales = f == null ? null : finite(ck.readAll(f.scale()), f.scale());
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
            float v;
            switch (t.dtype()) {
              case F32: v = map.getFloat(i * 4); break;
              case F16: v = DType.f16ToFloat(map.getShort(i * 2)); break;
              default: {
                long at = done + i;
                v = f.dequantize(DType.e4m3ToFloat(map.get(i)), at / cols, at % cols, scales);
              }
            }
            staging.putShort(i * 2, DType.floatToBf16(v));
          }
          src = staging;
        }
        ctx.makeCurrent();
        try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {  // another engine may capture
          JCudaDriver.cuMemcpyHtoD(dst.at(dstOff + done * 2), Pointer.to(src), (long) m * 2);
        }
      }
    } catch (IOException e) {
      throw new CheckpointException(t.file() + ": cannot read tensor '" + name + "': " + e.getMessage(), e);
    }
  }

  /**
   * The q or k rows (heads x headDim, cols) of tensor `name` in the device layout (QkLayout), as bf16
   * into dst at byte offset dstOff; an FP8 tensor dequantized first (Checkpoint.loadF32).
   */
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
      try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {  // another engine may capture
        JCudaDriver.cuMemcpyHtoD(dst.at(dstOff + (long) done * 2), Pointer.to(staging), (long) m * 2);
      }
    }
  }

  /** One line on how the FP8 matrices were placed, when there were any. */
  void logFp8() {
    if (keptFp8 == 0 && dequantized.isEmpty()) return;
    LOG.info("FP8 checkpoint: " + keptFp8 + " matrices kept FP8 on the device, " + dequantized.size()
        + " dequantized to bf16 on load" + (dequantized.isEmpty() ? "" : " (first: " + dequantized.get(0) + ")"));
  }

  @Override
  public void close() {
    if (!keep) owned.forEach(DeviceBuffer::close);
  }
}
