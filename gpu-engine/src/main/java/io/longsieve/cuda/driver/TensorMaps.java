package io.longsieve.cuda.driver;

import com.sun.jna.Library;
import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import java.util.HashMap;
import java.util.Map;
import jcuda.driver.CUdeviceptr;

/**
 * TMA tensor maps (CUtensorMap, 128 opaque bytes) for the sm_90a kernels, encoded by the driver's
 * {@code cuTensorMapEncodeTiled}. JCuda 12.6 does not bind that call, so it is reached through JNA
 * in the same libcuda.so.1 that JCuda loaded: loading it by that soname returns the instance the
 * process already holds (a plain "cuda" could find another file, such as a toolkit's forward-
 * compatibility libcuda.so, and two driver libraries in one process corrupt each other). Encoding
 * is host-only work (no context, no launch).
 *
 * <p>Every map here has the 128-byte swizzle and a box whose inner dimension is 128 bytes (64 bf16,
 * or 128 e4m3 bytes for the FP8 GEMM: {@link #matrixBytes}): the shared-memory layout the kernels'
 * wgmma descriptors read
 * (hopper/sm90.cuh). The kernels read the maps from device memory: each encoded map is copied once
 * into a 128-byte slot of this object's arena and the slot's address is what a launch passes (a map
 * passed by value as a __grid_constant__ parameter faulted when launched through JCuda on an H200).
 * Maps are cached by address and shape, since the forward pass hands the same buffers to the same
 * kernels layer after layer; when the arena is full the context is drained (no queued launch still
 * reads a slot) and the slots are handed out again. The arena lives as long as the context.
 *
 * <p>Failure semantics: {@link #available()} is false (and says why in {@link #unavailableReason()})
 * when libcuda cannot be bound through JNA; the engine then keeps the sm_80 kernels. An encoding the
 * driver refuses throws IllegalStateException with the CUresult and the shape.
 */
public final class TensorMaps {

  private static final int BF16 = 9;           // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
  private static final int UINT8 = 0;          // CU_TENSOR_MAP_DATA_TYPE_UINT8: float8_e4m3 moves as bytes
  private static final int SWIZZLE_128B = 3;   // CU_TENSOR_MAP_SWIZZLE_128B
  private static final int L2_256B = 3;        // CU_TENSOR_MAP_L2_PROMOTION_L2_256B
  private static final int SLOTS = 4096;      // 512 KB of device memory

  /** The one driver entry point bound through JNA. */
  interface Driver extends Library {
    int cuTensorMapEncodeTiled(Pointer map, int dtype, int rank, Pointer globalAddress, long[] globalDim,
                               long[] globalStrides, int[] boxDim, int[] elementStrides, int interleave, int swizzle,
                               int l2Promotion, int oobFill);
  }

  private static final Driver DRIVER;
  private static final String UNAVAILABLE;
  private static String library = "";

  static {
    Driver d = null;
    String why = null;
    for (String name : new String[] {"libcuda.so.1"}) {
      try {
        d = Native.load(name, Driver.class);
        library = com.sun.jna.NativeLibrary.getInstance(name).getFile().getPath();
        why = null;
        break;
      } catch (LinkageError | RuntimeException e) {
        why = "libcuda through JNA: " + e.getMessage();
      }
    }
    DRIVER = d;
    UNAVAILABLE = why;
  }

  public static boolean available() {
    return DRIVER != null;
  }

  public static String unavailableReason() {
    return UNAVAILABLE;
  }

  /** The file JNA bound (for the engine's start-up log line), or "" when none. */
  public static String library() {
    return library;
  }

  private record Key(long address, int dtype, long[] dims, long[] strides, int[] box) {
    @Override
    public boolean equals(Object o) {
      return o instanceof Key k && k.address == address && k.dtype == dtype && java.util.Arrays.equals(k.dims, dims)
          && java.util.Arrays.equals(k.strides, strides) && java.util.Arrays.equals(k.box, box);
    }

    @Override
    public int hashCode() {
      return Long.hashCode(address) * 31 + java.util.Arrays.hashCode(dims) * 7 + java.util.Arrays.hashCode(box);
    }
  }

  private final CudaContext ctx;
  private final DeviceBuffer arena;                    // (SLOTS, 128) bytes of encoded maps on the device
  private final Map<Key, CUdeviceptr> cache = new HashMap<>();
  private final Memory scratch = new Memory(128 + 64);
  private final Pointer aligned = scratch.align(64);  // the driver wants a 64-byte aligned CUtensorMap

  public TensorMaps(CudaContext ctx) {
    if (DRIVER == null) throw new IllegalStateException("TMA tensor maps are unavailable: " + UNAVAILABLE);
    this.ctx = ctx;
    this.arena = ctx.alloc((long) SLOTS * 128, "TMA tensor maps");
  }

  /**
   * A row-major (rows, cols) bf16 matrix at base, rowBytes apart (a multiple of 16), read in boxes
   * of boxRows rows by 64 columns: GEMM operands (rows = M or N, cols = K) and KV cache layers
   * (rows = page x nKv x pageSize, cols = headDim).
   */
  public synchronized CUdeviceptr matrix(CUdeviceptr base, long rows, long cols, long rowBytes, int boxRows) {
    return encode(DeviceAddress.of(base), BF16, new long[] {cols, rows}, new long[] {rowBytes}, new int[] {64, boxRows});
  }

  /**
   * A row-major (rows, cols) matrix of bytes (float8_e4m3) at base, rowBytes apart (a multiple of
   * 16), read in boxes of boxRows rows by 128 bytes: the FP8 GEMM's operands (hopper/gemm_fp8_sm90.cu).
   */
  public synchronized CUdeviceptr matrixBytes(CUdeviceptr base, long rows, long cols, long rowBytes, int boxRows) {
    return encode(DeviceAddress.of(base), UINT8, new long[] {cols, rows}, new long[] {rowBytes}, new int[] {128, boxRows});
  }

  /**
   * A (d2, d1, d0) bf16 tensor at base, d0 contiguous, dims 1 and 2 stride1 and stride2 bytes
   * apart, read in boxes of (box2, box1, 64): the query tile of the attention kernels, whose box
   * packs the query heads that share a KV head (box1 heads by box2 positions).
   */
  public synchronized CUdeviceptr tensor3(CUdeviceptr base, long d0, long d1, long d2, long stride1, long stride2,
                                        int box1, int box2) {
    return encode(DeviceAddress.of(base), BF16, new long[] {d0, d1, d2}, new long[] {stride1, stride2},
        new int[] {64, box1, box2});
  }

  /** The device address of the encoded map (a slot of the arena). */
  private CUdeviceptr encode(long address, int dtype, long[] dims, long[] strides, int[] box) {
    Key key = new Key(address, dtype, dims, strides, box);
    CUdeviceptr hit = cache.get(key);
    if (hit != null) return hit;
    if (address % 16 != 0) throw new IllegalArgumentException("a tensor map's base must be 16-byte aligned: " + address);
    for (long s : strides) {
      if (s % 16 != 0) throw new IllegalArgumentException("tensor map strides must be multiples of 16 bytes: " + s);
    }
    int[] elementStrides = new int[dims.length];
    java.util.Arrays.fill(elementStrides, 1);
    int r = DRIVER.cuTensorMapEncodeTiled(aligned, dtype, dims.length, new Pointer(address), dims, strides, box,
        elementStrides, 0, SWIZZLE_128B, L2_256B, 0);
    if (r != 0) {
      throw new IllegalStateException("cuTensorMapEncodeTiled failed with CUresult " + r + " for dims "
          + java.util.Arrays.toString(dims) + ", strides " + java.util.Arrays.toString(strides) + ", box "
          + java.util.Arrays.toString(box));
    }
    if (cache.size() == SLOTS) {  // full: once no queued launch reads a slot, hand them all out again
      ctx.synchronize();
      cache.clear();
    }
    CUdeviceptr slot = arena.at((long) cache.size() * 128);
    ctx.makeCurrent();
    try (CaptureGuard.Held sync = CaptureGuard.sync(ctx.ordinal())) {
      jcuda.driver.JCudaDriver.cuMemcpyHtoD(slot, jcuda.Pointer.to(aligned.getByteArray(0, 128)), 128);
    }
    cache.put(key, slot);
    return slot;
  }
}
