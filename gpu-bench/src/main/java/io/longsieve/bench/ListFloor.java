package io.longsieve.bench;

import io.longsieve.cuda.driver.KernelModule;
import io.longsieve.cuda.driver.Launcher;
import io.longsieve.cuda.kernels.Kernels;
import jcuda.driver.CUdeviceptr;

/**
 * The gather floor of list attention, for the benches (kernel in list_floor.cu): reads exactly the K and V
 * rows a decode call of ListKernels.attend reads over a shared list (list entry, page table, the rows of
 * every KV head), the same way (16-byte cp.async copies, a round of them in flight at once), with no
 * attention maths and no split merge. Its cold time bounds from below what any list-attention kernel of
 * that access pattern can take, which is what issue 5's 25x target is measured against.
 *
 * <p>Failure semantics: a head size other than 64 or 128, threads not a multiple of 32 in [32, 512], blocks
 * outside [1, 65535], an empty list or a chunk (entries per block) above {@link #MAX_CHUNK} throw
 * {@link IllegalArgumentException} before anything is launched. The launch is queued on the stream of the
 * {@link Kernels} given, with no synchronisation; device pointers are not checked (a slot outside the cache
 * reads garbage). Holds no device memory, only its module: the kernel is in the bench's own fatbin
 * ({@link #FATBIN}, gpu-bench/src/main/cuda), not the engine's. Close it when done.
 */
public final class ListFloor implements AutoCloseable {
  /** The bench-only kernels, built by gpu-bench/src/main/cuda/build-bench-fatbin.sh. */
  public static final String FATBIN = "/io/longsieve/bench/longsieve_bench.fatbin";

  /** Largest block of the kernel (its reduction scratch, LF_MAX_THREADS). */
  static final int MAX_THREADS = 512;
  /**
   * Shared memory a block takes at most: the staged offsets and the stage of copied pieces. 96 KB stages a
   * whole 168-entry chunk at d = 128 (2 x 168 x 256 bytes of rows): every sweep shape but the 8-block one
   * in one round; two such blocks fit an H100/H200 multiprocessor.
   */
  static final int SMEM_BUDGET = 96 * 1024;
  /** Most list entries per block: their offsets (8 bytes each) take at most a third of the budget. */
  static final int MAX_CHUNK = 4096;

  private final KernelModule module;
  private final Launcher l;

  /** Loads the bench fatbin on k's context; launches on k's stream. */
  public ListFloor(Kernels k) {
    this.module = new KernelModule(k.stream().context(), FATBIN);
    this.l = new Launcher(module, k.stream());
  }

  @Override
  public void close() {
    module.close();
  }

  /**
   * out (nKv, blocksPerKv) u32: entry [g * blocksPerKv + b] = the sum (mod 2^32) of every little-endian u32 word of
   * the kv.kRope() and kv.v() rows of KV head g at slots lists[e] for e in block b's entries [b * chunk, min(listLen,
   * b * chunk + chunk)), chunk = {@link #chunk}; 0 for a block past the list. lists (listLen) int cache slots (one
   * list, every KV head reads it, as a shared TokenSelect list); threads per block, a multiple of 32.
   */
  public void gather(CUdeviceptr out, Kernels.KvView kv, CUdeviceptr lists, int listLen, int blocksPerKv, int threads) {
    gather(out, kv, lists, listLen, blocksPerKv, threads, false);
  }

  /**
   * As above; physical: lists holds physical slots (page p's slots are p * pageSize ..) and kv's page table is not
   * read, one dependent lookup fewer (what a top-k that wrote physical slots would leave the list kernel).
   */
  public void gather(CUdeviceptr out, Kernels.KvView kv, CUdeviceptr lists, int listLen, int blocksPerKv, int threads,
              boolean physical) {
    check(kv.headDim(), listLen, blocksPerKv, threads);
    int d = kv.headDim(), chunk = chunk(listLen, blocksPerKv), stage = stage(d, chunk);
    l.launch(d == 128 ? "list_gather_floor_d128" : "list_gather_floor_d64", kv.nKv(), blocksPerKv, 1, threads,
        smem(chunk, stage), out, kv.kRope(), kv.v(), physical ? null : kv.pageTable(), lists, kv.nKv(), kv.pageSize(),
        listLen, chunk, stage);
  }

  static void check(int d, int listLen, int blocksPerKv, int threads) {
    if (d != 64 && d != 128) throw new IllegalArgumentException("head size " + d + ": the kernel takes 64 or 128");
    if (threads < 32 || threads > MAX_THREADS || threads % 32 != 0) {
      throw new IllegalArgumentException(threads + " threads: a multiple of 32 in [32, " + MAX_THREADS + "]");
    }
    if (blocksPerKv < 1 || blocksPerKv > 65535) throw new IllegalArgumentException(blocksPerKv + " blocks per KV head");
    if (listLen < 1) throw new IllegalArgumentException("list of " + listLen);
    if (chunk(listLen, blocksPerKv) > MAX_CHUNK) {
      throw new IllegalArgumentException(listLen + " entries over " + blocksPerKv + " blocks: more than " + MAX_CHUNK
          + " per block");
    }
  }

  /** List entries per block: the list split evenly, the last block ragged (later blocks empty where it ends early). */
  public static int chunk(int listLen, int blocksPerKv) {
    return (int) (((long) listLen + blocksPerKv - 1) / blocksPerKv);
  }

  /** 16-byte pieces per copy round: the chunk's K and V rows, or what the budget leaves beside the offsets. */
  static int stage(int d, int chunk) {
    return (int) Math.min((long) chunk * 2 * (d / 8), (SMEM_BUDGET - offsetBytes(chunk)) / 16);
  }

  /** The staged offsets (chunk) size_t, up to the next 16-byte boundary (where the stage starts). */
  static int offsetBytes(int chunk) {
    return (chunk * 8 + 15) / 16 * 16;
  }

  /** Dynamic shared memory of one block. */
  static int smem(int chunk, int stage) {
    return offsetBytes(chunk) + stage * 16;
  }
}
