package io.longsieve.cuda;

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
 * or JIT-compiles the PTX. Unloaded on close.
 */
public final class KernelModule implements AutoCloseable {

  static final String RESOURCE = "/io/longsieve/cuda/longsieve.fatbin";

  private final CudaContext ctx;
  private final CUmodule module = new CUmodule();
  private final Map<String, CUfunction> functions = new HashMap<>();
  private boolean closed;

  public KernelModule(CudaContext ctx) {
    this.ctx = ctx;
    byte[] image;
    try (InputStream in = KernelModule.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        throw new IllegalStateException(RESOURCE + " is not on the classpath: the engine was built without its CUDA "
            + "kernels (build gpu-engine with nvcc on PATH)");
      }
      image = in.readAllBytes();
    } catch (IOException e) {
      throw new IllegalStateException("cannot read " + RESOURCE + ": " + e.getMessage(), e);
    }
    ctx.makeCurrent();
    try {
      cuModuleLoadData(module, image);
    } catch (RuntimeException e) {
      throw new IllegalStateException("loading the kernel fatbin on " + ctx.describe() + " failed (" + e.getMessage()
          + "); a driver older than R580 cannot JIT nvcc 13's PTX: rebuild with a CUDA 12 nvcc", e);
    }
  }

  /** The kernel of that name; the first call looks it up. */
  public synchronized CUfunction function(String name) {
    return functions.computeIfAbsent(name, n -> {
      CUfunction f = new CUfunction();
      cuModuleGetFunction(f, module, n);
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
    cuModuleUnload(module);
  }
}
