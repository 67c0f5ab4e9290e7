package io.longsieve.cuda.kernels;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.driver.Launcher;
import jcuda.driver.CUdeviceptr;

/**
 * Attention over lists of cache slots on the GPU, the kernel every selection policy ends in (CPU
 * twin: cpu/policy/ListAttention; kernels in list_attention.cu and list_decode.cu).
 *
 * <p>Failure semantics: shapes it does not take (head size not a power of two in [8, 256], more
 * than 16 query heads per KV head, n < 1 or n > listLen, nLists neither 1 nor nKv, compact without
 * RoPE tables or inverse frequencies) throw {@link IllegalArgumentException} before anything is
 * launched. Work is queued on the stream of the {@link Kernels} given at construction, with no
 * synchronisation; the only exception is scratch growth (the first call at a larger shape), which
 * synchronises the context, frees and allocates. Device pointers are not checked: a list slot
 * outside the cache reads garbage. Owns its growable scratch, so close it (not thread-safe: one
 * instance per stream).
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
   * Most tile buffers per warp of the tensor-core decode kernel (list_decode.cu LD_MAX_STAGES); the plan
   * takes as many as {@link #TC_BLOCK_SMEM} allows ({@link #tcStages}), and no more than the warp has tiles.
   */
  static final int TC_MAX_STAGES = 3;
  /**
   * Shared memory one block of the tensor-core decode kernel may take (queries, staged offsets, tile
   * buffers): three blocks (the kernel's launch bound) then fit an H100/H200 multiprocessor's 228 KB with
   * their 1 KB reserve, and every plan fits the 99 KB of consumer GPUs. At d = 128 and a decode list's
   * split: two tile buffers per warp, for original and compact keys alike (compact keys add only their d / 2
   * inverse frequencies: each lane computes the cos/sin it rotates with).
   */
  static final int TC_BLOCK_SMEM = 75 * 1024;
  /** The tensor-core decode kernels by [d == 128][compact]: no string building per call. */
  private static final String[][] TC_KERNELS = {{"list_decode_d64", "list_decode_d64_compact"},
      {"list_decode_d128", "list_decode_d128_compact"}};
  /**
   * Blocks per multiprocessor the tensor-core decode kernel keeps resident (its launch bound and the smem
   * budget). The plan wants every block of a decode list resident at once and every warp's tiles in its
   * buffers: then all of the list's rows are requested in one round, which is what a list read cold from
   * HBM needs (the kernel is latency-bound: list -> page table -> row, then the split merge).
   */
  static final int TC_BLOCKS_PER_SM = 3;
  /** Largest split of the tensor-core decode kernel (its slot offsets and slots are staged in shared memory). */
  static final int TC_CHUNK_MAX = 1024;

  enum Path { TC_DECODE, GATHER_PREFILL, CORE }

  /**
   * How one call runs: path, entries per split, splits, blocks per KV head (CUDA-core head groups), tile
   * buffers per warp (tensor-core decode; 0 elsewhere).
   */
  public record Plan(Path path, int chunk, int splits, int headBlocks, int stages) {}

  private final Kernels k;
  private final Launcher l;
  private final Kernels.Workspace partials; // partO (n, nHeads, splits, d) f32 + partML (n, nHeads, splits, 2) f32
  private final Kernels.Workspace gathered; // K, V (pages, nKv, 64, d) bf16 + page table (pages) int, identity
  private final CudaContext ctx;
  private DeviceBuffer counters;            // (n, nKv) int on device, zero between launches (fused combine)
  private int countersAllocated;
  private boolean fusedCombine = true;

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
   * compact == true: K_e = kv.kPre() at slot lists[e] rotated at position e (RoPE by list index); the caller rotated
   *   row i of q at listLen - n + i. ropeCos/ropeSin (positions >= listLen, d/2) f32 are ropeTable's tables of the
   *   inverse frequencies invFreq (d/2) f32: the gather and CUDA-core paths read the tables, the tensor-core decode
   *   kernel computes the rows it needs from invFreq (cos/sin within ~1e-6 of the tables', list_decode.cu
   *   ld_rope_cs). All three are ignored for original keys (pass null).
   * kv.bias() != null: the logit of entry e for query head h gets + bias[lists[e] * nHeads + h] (after the scale).
   * Any power-of-two d in [8, 256]; group (nHeads / nKv) up to 16; n >= 1.
   */
  public void attend(CUdeviceptr out, CUdeviceptr q, Kernels.KvView kv, CUdeviceptr lists, int nLists, int listLen,
                     int n, int nHeads, boolean compact, CUdeviceptr ropeCos, CUdeviceptr ropeSin, CUdeviceptr invFreq,
                     float scale) {
    attend(out, q, kv, lists, nLists, listLen, n, nHeads, compact, ropeCos, ropeSin, invFreq, scale, 0);
  }

  /**
   * {@link #attend} with the tensor-core decode's entries per split fixed (rounded up to whole 64-entry
   * steps, at most {@link #TC_CHUNK_MAX}) instead of the plan's choice, for the bench's tuning sweep;
   * {@code chunk} 0 is the plan's choice.
   */
  public void attend(CUdeviceptr out, CUdeviceptr q, Kernels.KvView kv, CUdeviceptr lists, int nLists, int listLen,
                     int n, int nHeads, boolean compact, CUdeviceptr ropeCos, CUdeviceptr ropeSin, CUdeviceptr invFreq,
                     float scale, int chunk) {
    check(kv, nLists, listLen, n, nHeads, compact, ropeCos, ropeSin, invFreq);
    int d = kv.headDim(), nKv = kv.nKv(), group = nHeads / nKv;
    int perHead = nLists == 1 ? 0 : 1;
    int isCompact = compact ? 1 : 0;
    CUdeviceptr keys = compact ? kv.kPre() : kv.kRope();
    if (chunk < 0) throw new IllegalArgumentException("chunk " + chunk);
    Plan p = plan(n, listLen, d, group, nKv, kv.bias() != null, compact, k.smCount(), chunk);
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
          tcSmem(d, p.chunk(), p.stages(), compact), out, count, o, ml, q, keys, kv.v(), kv.pageTable(), lists,
          kv.bias(), compact ? invFreq : null, nHeads, nKv, kv.pageSize(), listLen, n, perHead, p.chunk(), p.stages(),
          scale);
      if (fused) return;  // the kernel's last block per (row, KV head) merged the splits
    } else {
      l.launch("list_split_core", nKv * p.headBlocks(), p.splits(), n, CORE_THREADS,
          coreSmem(Math.min(group, CORE_HEADS), p.chunk()), o, ml, q, keys, kv.v(), kv.pageTable(), lists, kv.bias(),
          ropeCos, ropeSin, nHeads, nKv, d, kv.pageSize(), listLen, n, perHead, isCompact, p.headBlocks(), p.chunk(),
          scale);
    }
    k.combine(out, o, ml, n, nHeads, p.splits(), d);
  }

  /**
   * Whether the tensor-core decode kernel merges its splits itself (last block per row and KV head,
   * default) or leaves it to attn_combine; the parity test runs both.
   */
  void fusedCombine(boolean on) {
    fusedCombine = on;
  }

  /** Changes whenever a scratch buffer is reallocated: a captured CUDA graph holds the old pointers. */
  public long generation() {
    return (long) partials.generation() + gathered.generation() + countersAllocated;
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
      countersAllocated++;
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
                    CUdeviceptr ropeCos, CUdeviceptr ropeSin, CUdeviceptr invFreq) {
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
    if (compact && (ropeCos == null || ropeSin == null || invFreq == null)) {
      throw new IllegalArgumentException("compact positions need the RoPE tables and their inverse frequencies");
    }
    if (Integer.bitCount(kv.pageSize()) != 1) {
      throw new IllegalArgumentException("page size " + kv.pageSize() + " must be a power of two");
    }
  }

  /** Chooses the path and the split of the list over blocks (host-side only; unit-tested without a GPU). */
  public static Plan plan(int n, int listLen, int d, int group, int nKv, boolean bias, int sms) {
    return plan(n, listLen, d, group, nKv, bias, false, sms, 0);
  }

  /**
   * As above for compact or original keys; chunkOverride > 0 forces the tensor-core decode split (the
   * bench's sweep). Tensor-core decode: the largest split whose warps hold all their tiles at once (one
   * round of loads, fewest splits to merge), or, where that would leave blocks waiting for a second wave,
   * the smallest split whose blocks are all resident ({@link #TC_BLOCKS_PER_SM} per multiprocessor);
   * capped by {@link #tcChunkMax}; as many tile buffers per warp as {@link #tcStages} allows.
   */
  public static Plan plan(int n, int listLen, int d, int group, int nKv, boolean bias, boolean compact, int sms,
                   int chunkOverride) {
    boolean tensorCores = (d == 64 || d == 128) && group <= 16;
    if (tensorCores && n > DECODE_ROWS_MAX && !bias) return new Plan(Path.GATHER_PREFILL, 0, 0, 1, 0);
    if (tensorCores) {
      int step = TC_TILE * TC_WARPS;  // a split is a whole number of the block's 4 x 16-entry tiles
      int chunk;
      if (chunkOverride > 0) {
        chunk = ceilTo(chunkOverride, step);
      } else {
        // splits per (row, KV head) that stay resident together; the smallest chunk that keeps to them
        int resident = Math.max(1, TC_BLOCKS_PER_SM * sms / (nKv * n));
        int fit = ceilTo((listLen + resident - 1) / resident, step);
        // the largest chunk whose warps buffer all their tiles: one round of loads, and the fewest splits to merge
        int oneRound = step;
        for (int t = TC_MAX_STAGES; t > 1; t--) {
          if (tcStages(d, compact, t * step) >= t) {
            oneRound = t * step;
            break;
          }
        }
        chunk = Math.max(fit, oneRound);
      }
      chunk = Math.max(step, Math.min(Math.min(chunk, tcChunkMax(d, compact)), ceilTo(listLen, step)));
      return new Plan(Path.TC_DECODE, chunk, (listLen + chunk - 1) / chunk, 1, tcStages(d, compact, chunk));
    }
    int heads = Math.min(group, CORE_HEADS), headBlocks = (group + CORE_HEADS - 1) / CORE_HEADS;
    int chunkMax = Math.max(64, Math.min(2048, (40 * 1024 / (4 * heads)) / 64 * 64));
    int target = Math.max(1, (2 * sms + nKv * headBlocks * n - 1) / (nKv * headBlocks * n));
    int chunk = (int) Math.min(chunkMax, Math.max(64, ((long) (listLen + target - 1) / target + 63) / 64 * 64));
    return new Plan(Path.CORE, chunk, (listLen + chunk - 1) / chunk, headBlocks, 0);
  }

  private static int ceilTo(int x, int step) {
    return (int) Math.min(Integer.MAX_VALUE / 2, ((long) x + step - 1) / step * step);
  }

  /**
   * Shared memory of the tensor-core decode kernel: queries, for compact keys the inverse frequencies (d / 2) f32,
   * staged offsets + slots, the warps' tile buffers.
   */
  static int tcSmem(int d, int chunk, int stages, boolean compact) {
    int ld = d + 8;
    return 16 * ld * 2 + (compact ? d / 2 * 4 : 0) + chunk * (8 + 4) + stages * tcStageBytes(d);
  }

  /**
   * One tile buffer of every warp of the tensor-core decode kernel: K and V (16, d + 8) bf16, compact keys or not
   * (their RoPE is computed on the fragments). The warps' merge reuses the buffers: (warps, 16, d + 8) f32, which
   * is what one buffer of K and V takes.
   */
  static int tcStageBytes(int d) {
    return TC_WARPS * 2 * TC_TILE * (d + 8) * 2;
  }

  /**
   * Tile buffers per warp of the tensor-core decode kernel at this split: as many as {@link #TC_BLOCK_SMEM}
   * leaves room for, at most {@link #TC_MAX_STAGES} and the warp's tiles, at least one.
   */
  static int tcStages(int d, boolean compact, int chunk) {
    int room = (TC_BLOCK_SMEM - tcSmem(d, chunk, 0, compact)) / tcStageBytes(d);
    return Math.max(1, Math.min(Math.min(TC_MAX_STAGES, chunk / (TC_TILE * TC_WARPS)), room));
  }

  /** Largest split (whole 64-entry steps) whose offsets and one tile buffer per warp fit {@link #TC_BLOCK_SMEM}. */
  static int tcChunkMax(int d, boolean compact) {
    int room = (TC_BLOCK_SMEM - tcSmem(d, 0, 1, compact)) / (8 + 4);
    return Math.max(TC_TILE * TC_WARPS, Math.min(TC_CHUNK_MAX, room / (TC_TILE * TC_WARPS) * (TC_TILE * TC_WARPS)));
  }

  /** Shared memory of the CUDA-core kernel: scores, reduction scratch, staged offsets + slots. */
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
