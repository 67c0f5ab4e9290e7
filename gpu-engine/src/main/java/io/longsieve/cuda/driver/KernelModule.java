package io.longsieve.cuda.driver;

import static jcuda.driver.JCudaDriver.*;

import java.io.IOException;
import java.io.InputStream;
import java.util.HashMap;
import java.util.Map;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;

/**
 * The project's kernels: the fatbin built by nvcc at build time (src/main/cuda/build-fatbin.sh),
 * read from the classpath and loaded with cuModuleLoadData. The driver picks the SASS for the GPU
 * or JIT-compiles the PTX. On compute capability 9.0 the sm_90a cubin of the Hopper kernels
 * (src/main/cuda/hopper) is loaded as a second module, and {@link #function} finds those kernels
 * there. Both are unloaded on close.
 */
public final class KernelModule implements AutoCloseable {

  static final String RESOURCE = "/io/longsieve/cuda/longsieve.fatbin";
  static final String HOPPER_RESOURCE = "/io/longsieve/cuda/longsieve_sm90a.cubin";

  /**
   * Whether a kernel lives in the sm_90a module (hopper/hopper.cu): every kernel there, and no other, has
   * "_sm90" in its name ({@code KernelModuleNamesTest} reads the sources and checks). A rule rather than a
   * list: a list had to be kept in step by hand, and the FP8 GEMMs were once missing from it.
   */
  static boolean isHopperKernel(String name) {
    return name.contains("_sm90");
  }

  private final CudaContext ctx;
  private final CUmodule module = new CUmodule();
  private final CUmodule hopper;  // null unless compute capability 9.0 and the cubin is on the classpath
  private final Map<String, CUfunction> functions = new HashMap<>();
  private boolean closed;

  /**
   * Whether this build carries the kernels: a machine without nvcc builds the engine without them
   * (build-fatbin.sh), and the CUDA backend must then say so instead of failing on a missing resource.
   */
  public static boolean isBuilt() {
    return KernelModule.class.getResource(RESOURCE) != null;
  }

  public KernelModule(CudaContext ctx) {
    this(ctx, RESOURCE, true);
  }

  /**
   * Another fatbin on the classpath, e.g. the benchmarks' own kernels
   * ({@code /io/longsieve/bench/longsieve_bench.fatbin}), as a module of its own: no sm_90a module.
   */
  public KernelModule(CudaContext ctx, String resource) {
    this(ctx, resource, false);
  }

  private KernelModule(CudaContext ctx, String resource, boolean withHopper) {
    this.ctx = ctx;
    byte[] image = read(resource);
    if (image == null) {
      throw new IllegalStateException(resource + " is not on the classpath: built without its CUDA kernels (build "
          + "with nvcc on PATH)");
    }
    ctx.makeCurrent();
    byte[] sm90a = withHopper && ctx.computeCapability() == 90 ? hopperImage() : null;
    CUmodule h = null;
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {  // a load allocates on the device
      try {
        cuModuleLoadData(module, image);
      } catch (RuntimeException e) {
        throw new IllegalStateException("loading the kernel fatbin on " + ctx.describe() + " failed (" + e.getMessage()
            + "); a driver older than R580 cannot JIT nvcc 13's PTX: rebuild with a CUDA 12 nvcc", e);
      }
      if (sm90a != null) {
        h = new CUmodule();
        cuModuleLoadData(h, sm90a);
      }
    }
    this.hopper = h;
  }

  /** The sm_90a cubin: the build's, or the file -Dlongsieve.hopperCubin names (one compiled on the GPU host). */
  private static byte[] hopperImage() {
    String file = System.getProperty("longsieve.hopperCubin");
    if (file == null) return read(HOPPER_RESOURCE);
    try {
      return java.nio.file.Files.readAllBytes(java.nio.file.Path.of(file));
    } catch (IOException e) {
      throw new IllegalStateException("cannot read longsieve.hopperCubin " + file + ": " + e.getMessage(), e);
    }
  }

  private static byte[] read(String resource) {
    try (InputStream in = KernelModule.class.getResourceAsStream(resource)) {
      return in == null ? null : in.readAllBytes();
    } catch (IOException e) {
      throw new IllegalStateException("cannot read " + resource + ": " + e.getMessage(), e);
    }
  }

  /** Whether the sm_90a module is loaded (compute capability 9.0 and a build that made it). */
  public boolean hasHopper() {
    return hopper != null;
  }

  /** The kernel of that name; the first call looks it up. */
  public synchronized CUfunction function(String name) {
    return functions.computeIfAbsent(name, n -> {
      CUfunction f = new CUfunction();
      boolean sm90a = isHopperKernel(n);
      if (sm90a && hopper == null) throw new IllegalStateException(n + " is an sm_90a kernel: not loaded on " + ctx.describe());
      cuModuleGetFunction(f, sm90a ? hopper : module, n);
      return f;
    });
  }

  public CudaContext context() {
    return ctx;
  }

  @Override
  public void close() {
    if (closed) return;
    closed = true;
    ctx.makeCurrent();
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {
      cuModuleUnload(module);
      if (hopper != null) cuModuleUnload(hopper);
    }
  }
}
