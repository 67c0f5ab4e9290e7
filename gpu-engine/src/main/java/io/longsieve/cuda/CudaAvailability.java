package io.longsieve.cuda;

import io.longsieve.cuda.driver.DeviceMemory;
import io.longsieve.cuda.driver.KernelModule;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import jcuda.driver.JCudaDriver;

/**
 * Whether the CUDA backend can run here. Without a GPU or driver JCuda fails during class
 * initialisation with an UnsatisfiedLinkError, an Error rather than an Exception, so LinkageError
 * is caught explicitly. A build without kernels (no nvcc) is reported as such before any of that.
 */
public final class CudaAvailability {
  private CudaAvailability() {}

  /** Why CUDA cannot run when the build skipped the kernels (no nvcc on the build machine). */
  public static final String NO_KERNELS = "this build has no CUDA kernels (it was built without nvcc): rebuild with "
      + "nvcc 12.x/13.x on PATH, or run with --device cpu";

  private static volatile String reason;
  private static volatile boolean probed;

  /** null when CUDA is usable, else why not (no driver, no device, backend not built). */
  public static synchronized String unavailableReason() {
    if (!probed) {
      reason = probe(KernelModule.isBuilt());
      probed = true;
    }
    return reason;
  }

  /** Checked before the driver: without kernels a GPU and driver here would not help. */
  static String probe(boolean kernelsBuilt) {
    if (!kernelsBuilt) return NO_KERNELS;
    try {
      JCudaDriver.setExceptionsEnabled(true);
      JCudaDriver.cuInit(0);
      int[] count = new int[1];
      JCudaDriver.cuDeviceGetCount(count);
      if (count[0] == 0) return "no CUDA device";
      return openRunnerFactory() == null ? "the CUDA backend is not built into this engine yet" : null;
    } catch (LinkageError e) {
      String msg = String.valueOf(e.getMessage());
      if (msg.contains("libcuda.so")) return "no NVIDIA driver (libcuda.so.1 not found)";
      return "JCuda driver binding not loadable: " + msg.lines().findFirst().orElse(msg);
    } catch (RuntimeException e) {
      return "CUDA initialisation failed: " + e.getMessage();
    }
  }

  /** The CUDA runner factory, looked up by name so the CPU build does not depend on it. */
  private static Class<?> openRunnerFactory() {
    try {
      return Class.forName("io.longsieve.cuda.CudaRunner");
    } catch (ClassNotFoundException e) {
      return null;
    }
  }

  /** Device memory the CUDA backend's engines hold in this process (its allocation accounting); 0 without CUDA. */
  public static long deviceMemoryUsedBytes() {
    return DeviceMemory.usedBytes();
  }

  public static ModelRunner openRunner(EngineSpec spec, LoadedModel model) {
    try {
      return (ModelRunner) openRunnerFactory().getMethod("open", EngineSpec.class, LoadedModel.class)
          .invoke(null, spec, model);
    } catch (ReflectiveOperationException e) {
      Throwable cause = e.getCause() != null ? e.getCause() : e;
      if (cause instanceof RuntimeException re) throw re;
      throw new IllegalStateException("cannot open the CUDA backend: " + cause.getMessage(), cause);
    }
  }
}
