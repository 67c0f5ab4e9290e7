package io.longsieve.cuda;

import jcuda.driver.CUdeviceptr;

/**
 * Attention over lists of cache slots on the GPU, the kernel every selection policy ends in (CPU
 * twin: attention/ListAttention; kernels in list_attention.cu and list_decode.cu).
 *
 * <p>Failure semantics: shapes it does not take (head size not a power of two in [8, 256], more
 * than 16 query heads per KV head, n < 1 or n > listLen, nLists neither 1 nor nKv, compact without
 * RoPE tables) throw {@link IllegalArgumentException} before anything is launched. Work is queued on
 * the stream of the {@link Kernels} given at construction, with no synchronisation; the only
 * exception is scratch growth (the first call at a larger shape), which synchronises the context,
 * frees and allocates. Device pointers are not checked: a list slot outside the cache reads garbage.
 * Owns its growable scratch, so close it (not thread-safe: one instance per stream).
 *
 * <p>Paths ({@link #plan}): head sizes 64/128 run on tensor cores, a gathered flash-decoding kernel
 * for few rows (or any rows with a bias), and for many rows a gather of the list into a dense
 * scratch cache followed by the dense flash prefill; other head sizes run a CUDA-core kernel.
 */
public final class ListKernels implements AutoCloseable {

  /** Rows up to which the tensor-core decode kernel beats gathering the list for the dense prefill. */
  static final int DECODE_ROWS_MAX = 8;
  /** Threads of the CUDA-core kernel; its shared reduction scratch is CORE_THREADS * 8 floats. */
  static final int CORE_THREADS = 256;
  /** Query heads per block of the CUDA-core kernel (register arrays); larger groups use several blocks. */
  static final int CORE_HEADS = 8;
  /** Entries per tile of a warp in the tensor-core decode kernel, and warps per block. */
  static final int TC_TILE = 16;
  static final int TC_WARPS = 4;
  /**
   * Tiles each warp of the tensor-core decode kernel keeps in flight (list_decode.cu LD_STAGES). Two: at
   * d = 128 a block then takes 73 KB and three fit a multiprocessor, whose shared memory is then all in
   * flight; a third stage would only move those bytes from three blocks to two.
   */
  static final int TC_STAGES = 2;
  /** The tensor-core decode kernels by [d == 128][compact]: no string building per call. */
  private static final String[][] TC_KERNELS = {{"list_decode_d64", "list_decode_d64_compact"},
      {"list_decode_d128", "list_decode_d128_compact"}};
  /**
   * Blocks per multiprocessor the tensor-core decode split aims at. Measured on the H200 (8B shapes,
   * 2688 entries, bench/RESULTS.md): 1 per SM 11.0 us, 2 per SM 12.3 us, 4 per SM 14.3 us — fewer,
   * longer splits keep more loads in flight per block and leave less to merge.
   */
  static final int TC_BLOCKS_PER_SM = 1;
  /** Largest split of the tensor-core decode kernel (its slot offsets and biases are staged in shared memory). */
  static final int TC_CHUNK_MAX = 1024;

  enum Path { TC_DECODE, GATHER_PREFILL, CORE }

  /** How one call runs: path, entries per split, splits, blocks per KV head (CUDA-core head groups). */
  record Plan(Path path, int chunk, int splits, int headBlocks) {}

  private final Kernels k;
  private final Launcher l;
  private final Kernels.Workspace partials; // partO (n, nHeads, splits, d) f32 + partML (n, nHeads, splits, 2) f32
  private final Kernels.Workspace gathered; // K, V (pages, nKv, 64, d) bf16 + page table (pages) int, identity
  private final CudaContext ctx;
  private DeviceBuffer counters;            // (n, nKv) int on device, zero between launches (fused combine)
  private boolean fusedCombine = true;
  private int blocksPerSm = TC_BLOCKS_PER_SM;

  /** Launches through k.launcher(); scratch is allocated from ctx on demand. */
  public ListKernels(Kernels k, CudaContext ctx) {
    this.k = k;
    this.ctx = ctx;
    this.l = k.launcher();
    this.partials = new Kernels.Workspace(ctx);
    this.gathered = new Kernels.Workspace(ctx);
  }

  /**
   * out (n, nHeads, d) bf16 = for every query row i and head h: softmax(scale * q_ih . K_e + bias) . V_e over list
   * entries e in [0, listLen - n + i + 1) of the head's list (the last n entries of a list are the rows' own slots).
   * lists (nLists, listLen) int cache slots (ascending in practice, not required); nLists == 1: all KV heads use list 0;
   *   nLists == kv.nKv(): KV head g (query heads g*group .. (g+1)*group-1) uses list g.
   * compact == false: K_e = kv.kRope() at slot lists[e] (keys rotated at their original positions); the caller rotated q
   *   at the rows' original positions.
   * compact == true: K_e = kv.kPre() at slot lists[e] rotated at position e (RoPE by list index) using the tables
   *   ropeCos/ropeSin (positions >= listLen, d/2) f32 from ropeTable; the caller rotated row i of q at listLen - n + i.
   * kv.bias() != null: the logit of entry e for KV head g gets + bias[lists[e] * nKv + g] (after the scale).
   * Any power-of-two d in [8, 256]; group (nHeads / nKv) up to 16; n >= 1.
   */
  public void attend(CUdeviceptr out, CUdeviceptr q, Kernels.KvView kv, CUdeviceptr lists, int nLists, int listLen,
                     int n, int nHeads, boolean compact, CUdeviceptr ropeCos, CUdeviceptr ropeSin, float scale) {
    check(kv, nLists, listLen, n, nHeads, compact, ropeCos, ropeSin);
    int d = kv.headDim(), nKv = kv.nKv(), group = nHeads / nKv;
    int perHead = nLists == 1 ? 0 : 1;
    int isCompact = compact ? 1 : 0;
    CUdeviceptr keys = compact ? kv.kPre() : kv.kRope();
    Plan p = plan(n, listLen, d, group, nKv, kv.bias() != null, k.smCount(), blocksPerSm);
    if (p.path() == Path.GATHER_PREFILL) {
      int pages = (listLen + Kernels.PAGE_SIZE - 1) / Kernels.PAGE_SIZE;
      long kvElems = (long) pages * nKv * Kernels.PAGE_SIZE * d;
      DeviceBuffer w = gathered.ensure(2 * kvElems * 2 + pages * 4L);
      CUdeviceptr gk = w.ptr(), gv = w.at(kvElems * 2), gpt = w.at(2 * kvElems * 2);
      l.launch("list_gather", pages * (Kernels.PAGE_SIZE / GATHER_ROWS), nKv, 1, GATHER_ROWS * d / 8, 0, gk, gv, gpt,
          keys, kv.v(), kv.pageTable(), lists, ropeCos, ropeSin, listLen, perHead, isCompact, nKv, d, kv.pageSize());
      k.flashPrefill(out, q, new Kernels.KvView(gk, gk, gv, gpt, nKv, d, Kernels.PAGE_SIZE), n, nHeads, listLen - n, 0,
          scale);
      return;
    }
    long partO = (long) n * nHeads * p.splits() * d, partMl = (long) n * nHeads * p.splits() * 2;
    DeviceBuffer w = partials.ensure((partO + partMl) * 4);
    CUdeviceptr o = w.ptr(), ml = w.at(partO * 4);
    if (p.path() == Path.TC_DECODE) {
      // the fused merge needs no shared memory: any split count merges in the one launch
      boolean fused = fusedCombine;
      CUdeviceptr count = fused ? counters(n * nKv) : null;
      l.launch(TC_KERNELS[d == 128 ? 1 : 0][isCompact], nKv, p.splits(), n, TC_WARPS * 32,
          tcSmem(d, p.chunk()), out, count, o, ml, q, keys, kv.v(), kv.pageTable(), lists, kv.bias(), ropeCos, ropeSin,
          nHeads, nKv, kv.pageSize(), listLen, n, perHead, p.chunk(), scale);
      if (fused) return;  // the kernel's last block per (row, KV head) merged the splits
    } else {
      l.launch("list_split_core", nKv * p.headBlocks(), p.splits(), n, CORE_THREADS,
          coreSmem(Math.min(group, CORE_HEADS), p.chunk()), o, ml, q, keys, kv.v(), kv.pageTable(), lists, kv.bias(),
          ropeCos, ropeSin, nHeads, nKv, d, kv.pageSize(), listLen, n, perHead, isCompact, p.headBlocks(), p.chunk(),
          scale);
    }
    l.launch("attn_combine", nHeads, n, 1, Math.max(32, Math.min(d, 256)), 0, out, o, ml, nHeads, p.splits(), d);
  }

  /**
   * Whether the tensor-core decode kernel merges its splits itself (last block per row and KV head,
   * default) or leaves it to attn_combine; the parity test runs both.
   */
  void fusedCombine(boolean on) {
    fusedCombine = on;
  }

  /** The fused combine's arrival counters: grows (synchronising) and zeroes new memory. */
  private CUdeviceptr counters(int count) {
    if (counters == null || counters.bytes() < count * 4L) {
      ctx.synchronize();
      if (counters != null) counters.close();
      counters = null;
      DeviceBuffer c = ctx.alloc(Math.max(count, 4096) * 4L, "list attention counters");
      c.fill32(0);
      ctx.synchronize();
      counters = c;
    }
    return counters.ptr();
  }

  /** Rows of one page the gather kernel's block copies (block = GATHER_ROWS * d / 8 threads, 8 elements each). */
  static final int GATHER_ROWS = 8;

  /**
   * cos, sin (positions, half) f32 = the RoPE angles model/Rope.angles gives at positions 0 .. positions-1
   * (use rope_cs from common.cuh, so the values are bit-identical to the CPU's). invFreq (half) f32.
   */
  public void ropeTable(CUdeviceptr cos, CUdeviceptr sin, CUdeviceptr invFreq, int positions, int half) {
    if (positions < 0 || half < 1) throw new IllegalArgumentException("rope table of " + positions + " x " + half);
    long total = (long) positions * half;
    if (total == 0) return;
    l.launch("rope_table", (int) Math.min(65535, (total + 255) / 256), 1, 1, 256, 0, cos, sin, invFreq, positions, half);
  }

  static void check(Kernels.KvView kv, int nLists, int listLen, int n, int nHeads, boolean compact,
                    CUdeviceptr ropeCos, CUdeviceptr ropeSin) {
    int d = kv.headDim(), nKv = kv.nKv();
    if (Integer.bitCount(d) != 1 || d < 8 || d > 256) {
      throw new IllegalArgumentException("headDim " + d + " must be a power of two in [8, 256]");
    }
    if (nKv < 1 || nHeads < nKv || nHeads % nKv != 0) {
      throw new IllegalArgumentException(nHeads + " query heads do not group over " + nKv + " KV heads");
    }
    if (nHeads / nKv > 16) throw new IllegalArgumentException("at most 16 query heads per KV head, not " + nHeads / nKv);
    if (n < 1 || n > listLen) throw new IllegalArgumentException(n + " rows over a list of " + listLen);
    if (nLists != 1 && nLists != nKv) {
      throw new IllegalArgumentException(nLists + " lists: one, or one per KV head (" + nKv + ")");
    }
    if (compact && (ropeCos == null || ropeSin == null)) {
      throw new IllegalArgumentException("compact positions need the RoPE tables");
    }
    if (Integer.bitCount(kv.pageSize()) != 1) {
      throw new IllegalArgumentException("page size " + kv.pageSize() + " must be a power of two");
    }
  }

  /** For the bench's tuning sweep: blocks per multiprocessor the tensor-core decode split aims at. */
  void blocksPerSm(int b) {
    if (b < 1) throw new IllegalArgumentException("blocks per multiprocessor " + b);
    blocksPerSm = b;
  }

  /** Chooses the path and the split of the list over blocks (host-side only; unit-tested without a GPU). */
  static Plan plan(int n, int listLen, int d, int group, int nKv, boolean bias, int sms) {
    return plan(n, listLen, d, group, nKv, bias, sms, TC_BLOCKS_PER_SM);
  }

  static Plan plan(int n, int listLen, int d, int group, int nKv, boolean bias, int sms, int blocksPerSm) {
    boolean tensorCores = (d == 64 || d == 128) && group <= 16;
    if (tensorCores && n > DECODE_ROWS_MAX && !bias) return new Plan(Path.GATHER_PREFILL, 0, 0, 1);
    if (tensorCores) {
      // about blocksPerSm blocks per multiprocessor; a split is a whole number of the block's 4 x 16-entry tiles
      int step = TC_TILE * TC_WARPS;
      int target = Math.max(1, (blocksPerSm * sms + nKv * n - 1) / (nKv * n));
      int chunk = (int) Math.min(TC_CHUNK_MAX, Math.max(step, ((long) (listLen + target - 1) / target + step - 1) / step * step));
      return new Plan(Path.TC_DECODE, chunk, (listLen + chunk - 1) / chunk, 1);
    }
    int heads = Math.min(group, CORE_HEADS), headBlocks = (group + CORE_HEADS - 1) / CORE_HEADS;
    int chunkMax = Math.max(64, Math.min(2048, (40 * 1024 / (4 * heads)) / 64 * 64));
    int target = Math.max(1, (2 * sms + nKv * headBlocks * n - 1) / (nKv * headBlocks * n));
    int chunk = (int) Math.min(chunkMax, Math.max(64, ((long) (listLen + target - 1) / target + 63) / 64 * 64));
    return new Plan(Path.CORE, chunk, (listLen + chunk - 1) / chunk, headBlocks);
  }

  /** Shared memory of the tensor-core decode kernel: queries, staged offsets + biases, per-warp K/V stages. */
  static int tcSmem(int d, int chunk) {
    int ld = d + 8;
    return 16 * ld * 2 + chunk * (8 + 4) + tcKvBytes(d);
  }

  /** The K/V stage buffers of the tensor-core decode kernel's warps (the warps' merge reuses them). */
  static int tcKvBytes(int d) {
    return TC_WARPS * TC_STAGES * 2 * TC_TILE * (d + 8) * 2;
  }

  /** Shared memory of the CUDA-core kernel: scores, reduction scratch, staged offsets + biases. */
  static int coreSmem(int heads, int chunk) {
    return (heads * chunk + CORE_THREADS * 8) * 4 + chunk * (8 + 4);
  }

  @Override
  public void close() {
    if (counters != null) counters.close();
    counters = null;
    partials.close();
    gathered.close();
  }
}
