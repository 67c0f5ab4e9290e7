package io.longsieve.cuda.driver;

import static jcuda.driver.JCudaDriver.*;

import jcuda.Pointer;
import jcuda.Sizeof;
import jcuda.driver.CUdeviceptr;

/**
 * A block of device memory, freed on close (idempotent). Copies here are synchronous and meant for
 * set-up and tests; the forward pass uses {@link CudaStream}'s asynchronous copies. The allocation,
 * the free and the synchronous copies tie the legacy stream or the device to every stream, so each
 * holds the GPU's {@link CaptureGuard} (another engine's graph capture waits for it).
 */
public final class DeviceBuffer implements AutoCloseable {

  private final CudaContext ctx;
  private final CUdeviceptr ptr = new CUdeviceptr();
  private final long bytes;
  private boolean freed;

  DeviceBuffer(CudaContext ctx, long bytes) {
    this.ctx = ctx;
    this.bytes = bytes;
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {
      cuMemAlloc(ptr, Math.max(bytes, 16));
    }
  }

  public long bytes() {
    return bytes;
  }

  /** The device address of the first byte. */
  public CUdeviceptr ptr() {
    if (freed) throw new IllegalStateException("device buffer used after close");
    return ptr;
  }

  /** The device address {@code offset} bytes in. */
  public CUdeviceptr at(long offset) {
    if (offset < 0 || offset > bytes) throw new IndexOutOfBoundsException("offset " + offset + " outside " + bytes + " bytes");
    return ptr().withByteOffset(offset);
  }

  public void upload(float[] a) {
    check((long) a.length * Sizeof.FLOAT);
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {
      cuMemcpyHtoD(ptr(), Pointer.to(a), (long) a.length * Sizeof.FLOAT);
    }
  }

  public void upload(short[] a) {
    check((long) a.length * Sizeof.SHORT);
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {
      cuMemcpyHtoD(ptr(), Pointer.to(a), (long) a.length * Sizeof.SHORT);
    }
  }

  public void upload(int[] a) {
    check((long) a.length * Sizeof.INT);
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {
      cuMemcpyHtoD(ptr(), Pointer.to(a), (long) a.length * Sizeof.INT);
    }
  }

  public float[] downloadFloats(int n) {
    check((long) n * Sizeof.FLOAT);
    float[] a = new float[n];
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {
      ctx.synchronize();
      cuMemcpyDtoH(Pointer.to(a), ptr(), (long) n * Sizeof.FLOAT);
    }
    return a;
  }

  public short[] downloadShorts(int n) {
    check((long) n * Sizeof.SHORT);
    short[] a = new short[n];
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {
      ctx.synchronize();
      cuMemcpyDtoH(Pointer.to(a), ptr(), (long) n * Sizeof.SHORT);
    }
    return a;
  }

  public int[] downloadInts(int n) {
    check((long) n * Sizeof.INT);
    int[] a = new int[n];
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {
      ctx.synchronize();
      cuMemcpyDtoH(Pointer.to(a), ptr(), (long) n * Sizeof.INT);
    }
    return a;
  }

  /** Fills every 32-bit word with {@code bits} (tests poison outputs with a NaN pattern). */
  public void fill32(int bits) {
    ctx.makeCurrent();
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {
      cuMemsetD32(ptr(), bits, bytes / 4);
    }
  }

  private void check(long n) {
    if (n > bytes) throw new IndexOutOfBoundsException(n + " bytes do not fit a buffer of " + bytes);
  }

  @Override
  public void close() {
    if (freed) return;
    freed = true;
    ctx.makeCurrent();
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {
      cuMemFree(ptr);
    }
    ctx.released(bytes);
  }
}
