package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.CaptureGuard;
import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.KvCompressKernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.model.ModelConfig;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import jcuda.driver.CUdeviceptr;

/**
 * What the GPU KV compression parts share: the observation window (cpu/policy/ObservationWindow on
 * the device), growable scratch that is freed after the one compression of a request, and the
 * compaction of a layer to per-KV-head keep lists (cpu/kernels/KvCache.retain). Failure semantics: CUDA
 * errors propagate; a keep list whose size differs from the planned one (a kernel bug) is an
 * IllegalStateException.
 */
final class GpuKvCompress {
  private GpuKvCompress() {}

  /**
   * Test hook: while true, every SelKV / SnapKV compaction also downloads its keep lists (one
   * synchronising read per layer) into {@link #keptPositions}. Off in production.
   */
  static volatile boolean recordKeep = false;

  /**
   * Test hook: layer → (nKv) → the original positions each KV head kept, ascending (the keep
   * list's slots plus the layer's position offset), from the latest compaction of that layer while
   * {@link #recordKeep} was on. Tests clear it; one recording test runs at a time.
   */
  static final Map<Integer, int[][]> keptPositions = new ConcurrentHashMap<>();

  /** Growable device buffers by slot; freed (after a synchronisation) on close. */
  static final class Scratch implements AutoCloseable {
    private final CudaContext ctx;
    private final DeviceBuffer[] bufs = new DeviceBuffer[24];

    Scratch(CudaContext ctx) {
      this.ctx = ctx;
    }

    CUdeviceptr get(int slot, long bytes) {
      DeviceBuffer b = bufs[slot];
      if (b == null || b.bytes() < bytes) {
        if (b != null) {
          ctx.synchronize();  // queued kernels may still use the smaller buffer
          b.close();
        }
        bufs[slot] = null;
        bufs[slot] = b = ctx.alloc(Math.max(bytes, 256), "KV compression scratch");
      }
      return b.ptr();
    }

    DeviceBuffer buffer(int slot) {
      return bufs[slot];
    }

    @Override
    public void close() {
      boolean any = false;
      for (DeviceBuffer b : bufs) any |= b != null;
      if (!any) return;
      ctx.synchronize();
      for (int i = 0; i < bufs.length; i++) {
        if (bufs[i] != null) bufs[i].close();
        bufs[i] = null;
      }
    }
  }

  /**
   * The last w prompt queries (before RoPE) of every layer, a ring per layer on the device, and
   * the attention they pay to the cache: attn[h, j] = Σ over window rows of softmax(q·k/√d + bias)[j].
   */
  static final class Observation implements AutoCloseable {
    final int w;
    private final int qDim, heads, d;
    private final DeviceBuffer ring;  // (layer, w, qDim) f32 queries before RoPE, ring order
    private final long[] seen;        // (layer) rows observed so far
    private final int[] posLast;      // (layer) position of the last observed row
    private final int[] posOffset;    // (layer) position − slot of the observed rows (contiguous prompt)

    Observation(int w, ModelConfig c, CudaContext ctx) {
      this.w = w;
      this.qDim = c.qDim();
      this.heads = c.numHeads();
      this.d = c.headDim();
      this.ring = ctx.alloc((long) c.numLayers() * w * qDim * 4, "observation window");
      this.seen = new long[c.numLayers()];
      this.posLast = new int[c.numLayers()];
      this.posOffset = new int[c.numLayers()];
    }

    private CUdeviceptr ring(int layer) {
      return ring.at((long) layer * w * qDim * 4);
    }

    /** Keeps the last w rows of the chunk's queries (as ObservationWindow.observe). */
    void observe(LayerCall c, KvCompressKernels kk) {
      int l = c.layer(), m = Math.min(c.n(), w);
      kk.obsStore(ring(l), c.qPre(), c.qStride(), c.n() - m, m, (int) ((seen[l] + c.n() - m) % w), w, qDim);
      seen[l] += c.n();
      posLast[l] = c.pos0() + c.n() - 1;
      posOffset[l] = c.pos0() - c.before();
    }

    int count(int layer) {
      return (int) Math.min(w, seen[layer]);
    }

    int posOffset(int layer) {
      return posOffset[layer];
    }

    /**
     * attn (heads, n) f32 in scratch slot 0 for the layer's first n slots; window row r at slot
     * n − count + r and position posLast − (count − 1 − r). Uses scratch slots 0..3.
     */
    CUdeviceptr attention(int layer, Kernels.KvView kv, int n, GpuEnv env, KvCompressKernels kk, Scratch s) {
      int cnt = count(layer);
      CUdeviceptr attn = s.get(0, (long) heads * n * 4);
      CUdeviceptr qr = s.get(1, (long) heads * cnt * d * 4);
      CUdeviceptr partial = s.get(2, (long) heads * cnt * KvCompressKernels.obsTiles(n) * 2 * 4);
      CUdeviceptr stats = s.get(3, (long) heads * cnt * 2 * 4);
      int head0 = (int) ((seen[layer] - cnt) % w);
      kk.obsRope(qr, ring(layer), head0, w, cnt, heads, d, env.invFreq(), posLast[layer]);
      kk.obsAttention(attn, partial, stats, qr, kv, n, cnt, heads, env.scale(), env.k());
      return attn;
    }

    @Override
    public void close() {
      ring.close();
    }
  }

  /**
   * Checks the (kept, dropped) counts (nKv, 2) the lists kernel wrote against the plan: one small
   * read per layer (synchronises the stream).
   */
  static void checkCounts(GpuEnv env, DeviceBuffer counts, int nKv, int kept, int dropped) {
    env.k().stream().synchronize();
    int[] c = counts.downloadInts(nKv * 2);
    for (int g = 0; g < nKv; g++) {
      if (c[2 * g] != kept || c[2 * g + 1] != dropped) {
        throw new IllegalStateException("KV head " + g + " keeps " + c[2 * g] + " / drops " + c[2 * g + 1]
            + " slots, planned " + kept + " / " + dropped);
      }
    }
  }

  /**
   * Compacts a layer to keep (nKv, count) int (ascending per KV head) through scratch slot
   * `slot`, zeroes the bias left behind and sets the length (cpu/kernels/KvCache.retain).
   */
  static void retain(PagedKvCache kv, int layer, CUdeviceptr keep, int count, KvCompressKernels kk, Scratch s,
                     int slot) {
    Kernels.KvView view = kv.layer(layer);
    int n = kv.length(layer);
    CUdeviceptr scratch = s.get(slot, KvCompressKernels.compactScratchBytes(count, kv.nKv, kv.nHeads, kv.headDim));
    kk.compact(view, kv.nHeads, scratch, keep, count, 0, 0, count, n);
    kv.setLength(layer, count);
  }

  /** retain, first recording the keep lists as positions (slot + posOffset) while {@link #recordKeep} is on. */
  static void retain(PagedKvCache kv, int layer, CUdeviceptr keep, int count, KvCompressKernels kk, Scratch s,
                     int slot, int posOffset) {
    if (recordKeep) record(kv.context().ordinal(), layer, keep, count, kv.nKv, posOffset);
    retain(kv, layer, keep, count, kk, s, slot);
  }

  private static void record(int gpu, int layer, CUdeviceptr keep, int count, int nKv, int posOffset) {
    int[] flat = new int[nKv * count];
    try (CaptureGuard.Held sync = CaptureGuard.sync(gpu)) {
      jcuda.driver.JCudaDriver.cuCtxSynchronize();  // the lists were written on the kernels' stream
      jcuda.driver.JCudaDriver.cuMemcpyDtoH(jcuda.Pointer.to(flat), keep, (long) flat.length * 4);
    }
    int[][] kept = new int[nKv][count];
    for (int g = 0; g < nKv; g++) {
      for (int i = 0; i < count; i++) kept[g][i] = flat[g * count + i] + posOffset;
    }
    keptPositions.put(layer, kept);
  }
}
