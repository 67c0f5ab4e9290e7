package io.longsieve.cuda.driver;

import static jcuda.driver.JCudaDriver.*;

import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.JCudaDriver;

/**
 * One GPU and its primary CUDA context, plus the engine's memory budget on it.
 *
 * <p>Failure semantics: every driver call throws {@link jcuda.CudaException} whose message is the
 * CUresult name (exceptions are enabled once, globally); allocations beyond the budget throw
 * {@link IllegalStateException} naming what was being allocated. The primary context is used (not
 * cuCtxCreate, whose signature changed in CUDA 13 while JCuda 12.6 still binds the old one); it is
 * made current on every thread that calls {@link #makeCurrent()}, which each entry point does.
 * Closing releases the primary-context reference; buffers must be closed first.
 */
public final class CudaContext implements AutoCloseable {

  private final int ordinal;
  private final CUdevice device = new CUdevice();
  private final CUcontext context = new CUcontext();
  private final String name;
  private final int smCount;
  private final int maxSharedPerBlockOptin;
  private final int computeCapability;  // major * 10 + minor: 90 on H100/H200
  private final long budget;
  private long used;
  private boolean closed;

  /**
   * @param ordinal        CUDA device ordinal; negative means 0
   * @param memoryFraction share of the memory cuMemGetInfo reports free at open that the engine may take
   */
  public CudaContext(int ordinal, double memoryFraction) {
    JCudaDriver.setExceptionsEnabled(true);
    cuInit(0);
    this.ordinal = Math.max(0, ordinal);
    int[] count = new int[1];
    cuDeviceGetCount(count);
    if (this.ordinal >= count[0]) {
      throw new IllegalArgumentException("GPU ordinal " + this.ordinal + " does not exist: " + count[0] + " CUDA device(s)");
    }
    cuDeviceGet(device, this.ordinal);
    cuDevicePrimaryCtxRetain(context, device);
    cuCtxSetCurrent(context);
    byte[] buf = new byte[256];
    cuDeviceGetName(buf, buf.length, device);
    int len = 0;
    while (len < buf.length && buf[len] != 0) len++;
    this.name = new String(buf, 0, len, java.nio.charset.StandardCharsets.US_ASCII);
    this.smCount = attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    this.maxSharedPerBlockOptin = attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    this.computeCapability = 10 * attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        + attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    long[] free = new long[1], total = new long[1];
    cuMemGetInfo(free, total);
    this.budget = (long) (free[0] * memoryFraction);
  }

  private int attribute(int attr) {
    int[] v = new int[1];
    cuDeviceGetAttribute(v, attr, device);
    return v[0];
  }

  /** Binds this context to the calling thread; CUDA contexts are per thread. */
  public void makeCurrent() {
    if (closed) throw new IllegalStateException("CUDA context of " + describe() + " is closed");
    cuCtxSetCurrent(context);
  }

  public int ordinal() {
    return ordinal;
  }

  public String name() {
    return name;
  }

  public int smCount() {
    return smCount;
  }

  public int maxSharedPerBlockOptin() {
    return maxSharedPerBlockOptin;
  }

  /** Compute capability as major * 10 + minor (90: Hopper, where the sm_90a kernels run). */
  public int computeCapability() {
    return computeCapability;
  }

  /** "cuda:0 NVIDIA H200", as the stats report it. */
  public String describe() {
    return "cuda:" + ordinal + " " + name;
  }

  public long budgetBytes() {
    return budget;
  }

  public synchronized long usedBytes() {
    return used;
  }

  /** Allocates device memory inside the budget. */
  public DeviceBuffer alloc(long bytes, String what) {
    synchronized (this) {
      if (used + bytes > budget) {
        throw new IllegalStateException(String.format("GPU memory budget exceeded allocating %s (%.1f MiB): %.1f of %.1f MiB "
            + "in use on %s; raise memoryFraction or shorten the context", what, bytes / 1048576.0, used / 1048576.0,
            budget / 1048576.0, describe()));
      }
      used += bytes;
      DeviceMemory.add(bytes);
    }
    try {
      makeCurrent();
      return new DeviceBuffer(this, bytes);
    } catch (RuntimeException e) {
      released(bytes);
      throw e;
    }
  }

  /**
   * b when it holds bytes, else a new buffer with an eighth more room (what grows a little every decode step, as
   * the context does, then reallocates once per many steps, not once per step: a reallocation waits for the
   * device to drain, so each one leaves the GPU idle while the host refills the stream). b, when replaced, is
   * freed after the context's queued work, which may still read it. Throws IllegalStateException (b already
   * freed) when the budget cannot hold the new buffer.
   */
  public DeviceBuffer grow(DeviceBuffer b, long bytes, String what) {
    if (b != null && b.bytes() >= bytes) return b;
    if (b != null) {
      synchronize();
      b.close();
    }
    return alloc(grownBytes(bytes), what);
  }

  /** What {@link #grow} allocates for a need of bytes: an eighth more, at least 16. */
  public static long grownBytes(long bytes) {
    return Math.max(16, bytes + bytes / 8);
  }

  synchronized void released(long bytes) {
    used -= bytes;
    DeviceMemory.add(-bytes);
  }

  /** Waits for all work of the context (outside any capture on this GPU: {@link CaptureGuard}). */
  public void synchronize() {
    makeCurrent();
    try (CaptureGuard.Held sync = CaptureGuard.sync(ordinal)) {
      cuCtxSynchronize();
    }
  }

  @Override
  public void close() {
    if (closed) return;
    closed = true;
    cuDevicePrimaryCtxRelease(device);
  }
}
