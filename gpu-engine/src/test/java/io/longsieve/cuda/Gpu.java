package io.longsieve.cuda;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.driver.KernelModule;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.model.DType;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * What the GPU parity tests share: one context, module, stream and {@link Kernels} per test class,
 * buffers freed at the end, random bf16-representable inputs (never zeros), NaN-poisoned outputs
 * and the relative-error check. Tests using it are tagged "gpu" and run on a GPU host only.
 */
public final class Gpu implements AutoCloseable {

  /** bf16 has 8 significant bits: products and sums of them land well inside 1e-2 relative. */
  public static final double BF16_TOLERANCE = 1e-2;
  static final int NAN_BITS = 0x7fc00000;          // f32 quiet NaN
  static final int NAN_BF16_PAIR = 0x7fc07fc0;     // two bf16 quiet NaNs

  public final CudaContext ctx;
  public final KernelModule module;
  public final CudaStream stream;
  public final Kernels k;    // what the engine uses on this GPU (the sm_90a kernels on an H200 unless -Dlongsieve.hopper=false)
  public final Kernels k80;  // the sm_80 kernels, held to the same references on every GPU
  private final List<DeviceBuffer> buffers = new ArrayList<>();

  public Gpu() {
    ctx = new CudaContext(0, 0.5);
    module = new KernelModule(ctx);
    stream = new CudaStream(ctx);
    k = new Kernels(module, stream);
    k80 = new Kernels(module, stream, false);
  }

  public DeviceBuffer f32(float[] v) {
    DeviceBuffer b = alloc(v.length * 4L);
    b.upload(v);
    return b;
  }

  public DeviceBuffer bf16(float[] v) {
    DeviceBuffer b = alloc(v.length * 2L);
    b.upload(toBf16(v));
    return b;
  }

  public DeviceBuffer ints(int[] v) {
    DeviceBuffer b = alloc(v.length * 4L);
    b.upload(v);
    return b;
  }

  /** A buffer of `bytes` filled with NaN, so an element a kernel forgets to write fails the check. */
  public DeviceBuffer poisoned(long bytes, boolean bf16) {
    DeviceBuffer b = alloc(bytes);
    b.fill32(bf16 ? NAN_BF16_PAIR : NAN_BITS);
    return b;
  }

  public DeviceBuffer alloc(long bytes) {
    DeviceBuffer b = ctx.alloc((bytes + 3) / 4 * 4, "test buffer");
    buffers.add(b);
    return b;
  }

  public float[] readF32(DeviceBuffer b, int n) {
    stream.synchronize();
    return b.downloadFloats(n);
  }

  public float[] readBf16(DeviceBuffer b, int n) {
    stream.synchronize();
    return fromBf16(b.downloadShorts(n));
  }

  /** Gaussian values rounded to bf16, none exactly zero. */
  public static float[] random(Random r, int n, double scale) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      float x;
      do x = roundBf16((float) (r.nextGaussian() * scale)); while (x == 0f);
      v[i] = x;
    }
    return v;
  }

  public static float roundBf16(float f) {
    return Float.intBitsToFloat(DType.floatToBf16(f) << 16);
  }

  public static short[] toBf16(float[] v) {
    short[] s = new short[v.length];
    for (int i = 0; i < v.length; i++) s[i] = DType.floatToBf16(v[i]);
    return s;
  }

  public static float[] fromBf16(short[] s) {
    float[] v = new float[s.length];
    for (int i = 0; i < s.length; i++) v[i] = Float.intBitsToFloat((s[i] & 0xffff) << 16);
    return v;
  }

  /** ‖got − ref‖ / ‖ref‖, failing on any non-finite element (an unwritten, NaN-poisoned one). */
  public static double relErr(float[] got, float[] ref) {
    double num = 0, den = 0;
    for (int i = 0; i < ref.length; i++) {
      assertTrue(Float.isFinite(got[i]), "element " + i + " is " + got[i] + " (unwritten or overflow)");
      num += (double) (got[i] - ref[i]) * (got[i] - ref[i]);
      den += (double) ref[i] * ref[i];
    }
    return Math.sqrt(num / Math.max(den, 1e-30));
  }

  public static void assertClose(float[] got, float[] ref, double tol, String what) {
    double e = relErr(got, ref);
    assertTrue(e <= tol, what + ": relative error " + e + " > " + tol);
  }

  @Override
  public void close() {
    stream.synchronize();
    buffers.forEach(DeviceBuffer::close);
    stream.close();
    module.close();
    ctx.close();
  }
}
