package io.longsieve.cuda;

import static jcuda.driver.JCudaDriver.*;

import java.util.HashMap;
import java.util.Map;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUfunction;
import jcuda.driver.CUfunction_attribute;

/**
 * Launches kernels of one module on one stream. Arguments are boxed Java values mapped to kernel
 * parameters by type: {@link CUdeviceptr} (or null for a null pointer), Integer, Long, Float,
 * Double. Launches are asynchronous; a bad launch configuration throws at once with its CUresult.
 */
final class Launcher {

  private static final CUdeviceptr NULL = new CUdeviceptr();

  private final KernelModule module;
  private final CudaStream stream;
  // per kernel, the dynamic shared memory its attribute allows: only ever raised. (Keyed by size, a
  // smaller new size used to lower the attribute under a larger size seen before, which then failed
  // with CUDA_ERROR_INVALID_VALUE: the list bench's split sweep at its second context.)
  private final Map<String, Integer> raisedSmem = new HashMap<>();

  Launcher(KernelModule module, CudaStream stream) {
    this.module = module;
    this.stream = stream;
  }

  CudaStream stream() {
    return stream;
  }

  CudaContext context() {
    return module.context();
  }

  void launch(String kernel, int gx, int gy, int gz, int block, int smemBytes, Object... args) {
    CUfunction f = module.function(kernel);
    if (smemBytes > 32 * 1024 && smemBytes > raisedSmem.getOrDefault(kernel, 0)) {
      if (smemBytes > module.context().maxSharedPerBlockOptin()) {
        throw new IllegalStateException(kernel + " needs " + smemBytes + " B of shared memory per block; "
            + module.context().describe() + " allows " + module.context().maxSharedPerBlockOptin());
      }
      // another launcher of the module may have raised it further: never lower it
      int[] now = new int[1];
      cuFuncGetAttribute(now, CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f);
      if (now[0] < smemBytes) {
        cuFuncSetAttribute(f, CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smemBytes);
      }
      raisedSmem.put(kernel, Math.max(now[0], smemBytes));
    }
    Pointer[] ps = new Pointer[args.length];
    for (int i = 0; i < args.length; i++) ps[i] = param(args[i]);
    cuLaunchKernel(f, gx, gy, gz, block, 1, 1, smemBytes, stream.handle(), Pointer.to(ps), null);
  }

  private static Pointer param(Object a) {
    if (a == null) return Pointer.to(NULL);
    if (a instanceof CUdeviceptr p) return Pointer.to(p);
    if (a instanceof Integer i) return Pointer.to(new int[] {i});
    if (a instanceof Long l) return Pointer.to(new long[] {l});
    if (a instanceof Float f) return Pointer.to(new float[] {f});
    if (a instanceof Double d) return Pointer.to(new double[] {d});
    throw new IllegalArgumentException("unsupported kernel argument " + a.getClass());
  }
}
