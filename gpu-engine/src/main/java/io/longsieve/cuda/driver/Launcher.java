package io.longsieve.cuda.driver;

import static jcuda.driver.JCudaDriver.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUfunction;
import jcuda.driver.CUfunction_attribute;

/**
 * Launches kernels of one module on one stream. Arguments are boxed Java values mapped to kernel
 * parameters by type: {@link CUdeviceptr} (or null for a null pointer), Integer, Long, Float,
 * Double. Launches are asynchronous; a bad launch configuration throws at once with its CUresult.
 */
public final class Launcher {

  private static final CUdeviceptr NULL = new CUdeviceptr();

  private final KernelModule module;
  private final CudaStream stream;
  private CudaStream active;               // where launches go: the launcher's stream, or a branch's (onBranch)
  private CudaStream.Event barrierOrder;  // inside branches: the last grid-barrier launch, which the next waits for
  // per kernel, the dynamic shared memory its attribute allows: only ever raised. (Keyed by size, a
  // smaller new size used to lower the attribute under a larger size seen before, which then failed
  // with CUDA_ERROR_INVALID_VALUE: the list bench's split sweep at its second context.)
  private final Map<String, Integer> raisedSmem = new HashMap<>();

  public Launcher(KernelModule module, CudaStream stream) {
    this.module = module;
    this.stream = stream;
    this.active = stream;
  }

  /**
   * Kernels whose blocks wait for each other at a grid barrier (all of them must be resident at
   * once): two running side by side could each hold part of the GPU the other needs, so launches
   * in branches are ordered one after another through the branches' barrier event.
   */
  private static final java.util.Set<String> GRID_BARRIER = java.util.Set.of("ts_topk_lists");

  /**
   * Runs work with this launcher's launches queued on branch instead of its own stream (a branch
   * of a fork: the caller orders branch after and before the stream with events); grid-barrier
   * kernels launched in any branch wait for the previous one through order, recorded on the
   * launcher's stream before the first branch. Not reentrant.
   */
  public void onBranch(CudaStream branch, CudaStream.Event order, Runnable work) {
    active = branch;
    barrierOrder = order;
    try {
      work.run();
    } finally {
      active = stream;
      barrierOrder = null;
    }
  }

  public CudaStream stream() {
    return stream;
  }

  public CudaContext context() {
    return module.context();
  }

  /** Kernel launches so far, all launchers (benchmarks: launches per decode step). */
  public static final LongAdder LAUNCHES = new LongAdder();

  public void launch(String kernel, int gx, int gy, int gz, int block, int smemBytes, Object... args) {
    LAUNCHES.increment();
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
    boolean ordered = barrierOrder != null && GRID_BARRIER.contains(kernel);
    if (ordered) active.waitFor(barrierOrder);
    if (packed) {
      pack(args);
      cuLaunchKernel(f, gx, gy, gz, block, 1, 1, smemBytes, active.handle(), null, extra);
    } else {
      Pointer[] ps = new Pointer[args.length];
      for (int i = 0; i < args.length; i++) ps[i] = param(args[i]);
      cuLaunchKernel(f, gx, gy, gz, block, 1, 1, smemBytes, active.handle(), Pointer.to(ps), null);
    }
    if (ordered) active.record(barrierOrder);
  }

  /**
   * Whether arguments travel packed in one buffer (CU_LAUNCH_PARAM_BUFFER_POINTER: one direct
   * buffer, no per-argument Java arrays for JCuda to pin) or as JCuda's pointer-per-argument list.
   * Both give the kernel the same bytes; packing costs the host far less per launch, which decode
   * steps of many small kernels feel. {@code -Dlongsieve.packedLaunch=false} turns it off.
   */
  public static volatile boolean packed = !"false".equals(System.getProperty("longsieve.packedLaunch"));

  private final ByteBuffer argBuf = ByteBuffer.allocateDirect(1024).order(ByteOrder.nativeOrder());
  private final ByteBuffer argSize = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
  private final Pointer extra = Pointer.to(CU_LAUNCH_PARAM_BUFFER_POINTER, Pointer.to(argBuf),
      CU_LAUNCH_PARAM_BUFFER_SIZE, Pointer.to(argSize), CU_LAUNCH_PARAM_END);

  /** Lays the arguments out as the kernel's parameters are laid out: each at its natural alignment. */
  private void pack(Object[] args) {
    ByteBuffer b = argBuf;
    b.clear();
    for (Object a : args) {
      if (a == null) b.position(align(b.position(), 8)).putLong(0L);
      else if (a instanceof CUdeviceptr p) b.position(align(b.position(), 8)).putLong(DeviceAddress.of(p));
      else if (a instanceof Integer i) b.position(align(b.position(), 4)).putInt(i);
      else if (a instanceof Float x) b.position(align(b.position(), 4)).putFloat(x);
      else if (a instanceof Long l) b.position(align(b.position(), 8)).putLong(l);
      else if (a instanceof Double d) b.position(align(b.position(), 8)).putDouble(d);
      else throw new IllegalArgumentException("unsupported kernel argument " + a.getClass());
    }
    argSize.putLong(0, b.position());
  }

  private static int align(int at, int to) {
    return (at + to - 1) / to * to;
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
