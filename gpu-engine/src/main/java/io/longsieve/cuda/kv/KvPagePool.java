package io.longsieve.cuda.kv;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.model.ModelConfig;
import jcuda.driver.CUdeviceptr;

/**
 * The KV memory of many sequences: one big set of kPre / kRope / v buffers cut into pages of
 * {@link Kernels#PAGE_SIZE} slots that sequences ({@link PagedKvCache}) take as they grow and give
 * back when compression shrinks them or they close, so memory freed by SelKV is memory another
 * document can use. A pool page spans all layers (one page table per sequence serves every layer).
 *
 * <p>A page may be held by more than one owner (prefix reuse: the sequence that computed a prompt
 * prefix, the kept prefix and its forks read the same full pages): {@link #take} hands a page out
 * with one reference, {@link #retain} adds one, {@link #give} drops one and frees the page when none
 * is left. A page held more than once is read-only; an owner that must rewrite it copies it first
 * ({@link #copyPage}, {@link PagedKvCache#unshare}).
 *
 * <p>Failure semantics: the constructor throws IllegalStateException when the context's budget
 * cannot hold the pool; {@link #take} throws IllegalStateException, which reads as out of memory
 * (io.longsieve.engine.OutOfMemory), when no page is free (nothing changes). Not thread-safe: one
 * engine thread hands pages out.
 */
public final class KvPagePool implements AutoCloseable {

  public final int layers, nKv, headDim, pageSize, pages;
  public final long layerBytes;             // one layer of one of kPre / kRope / v
  private final DeviceBuffer kPre;   // (layer, poolPage, nKv, pageSize, headDim) bf16, keys before RoPE
  private final DeviceBuffer kRope;  // (layer, poolPage, nKv, pageSize, headDim) bf16, keys rotated at their position
  private final DeviceBuffer v;      // (layer, poolPage, nKv, pageSize, headDim) bf16
  private final FreeList free;

  public KvPagePool(CudaContext ctx, ModelConfig c, int pages) {
    if (pages < 1) throw new IllegalArgumentException("a pool needs at least one page, not " + pages);
    this.layers = c.numLayers();
    this.nKv = c.numKvHeads();
    this.headDim = c.headDim();
    this.pageSize = Kernels.PAGE_SIZE;
    this.pages = pages;
    this.layerBytes = (long) pages * nKv * pageSize * headDim * 2;
    DeviceBuffer a = null, b = null;
    try {
      a = ctx.alloc(layerBytes * layers, "KV pool keys before RoPE");
      b = ctx.alloc(layerBytes * layers, "KV pool rotated keys");
      this.v = ctx.alloc(layerBytes * layers, "KV pool values");
    } catch (RuntimeException e) {
      if (a != null) a.close();
      if (b != null) b.close();
      throw e;
    }
    this.kPre = a;
    this.kRope = b;
    this.free = new FreeList(pages);
  }

  /** Device bytes of one pool page (all layers, keys twice and values). */
  public static long pageBytes(ModelConfig c) {
    return pageBytes(c.numLayers(), c.numKvHeads(), c.headDim());
  }

  static long pageBytes(int layers, int nKv, int headDim) {
    return 3L * layers * nKv * Kernels.PAGE_SIZE * headDim * 2;
  }

  /**
   * Pages of a runner's shared pool (prefix reuse): what fits {@code bytes}, but no more than
   * {@code maxBatch} sequences of {@code context} tokens and two more (kept prefixes, spare), at least one.
   */
  public static int sharedPages(ModelConfig c, long bytes, int maxBatch, int context) {
    long need = (maxBatch + 2L) * ((context + Kernels.PAGE_SIZE - 1) / Kernels.PAGE_SIZE);
    return (int) Math.max(1, Math.min(need, pagesFitting(c, bytes)));
  }

  /** The most pages that fit `bytes` of device memory. */
  public static int pagesFitting(ModelConfig c, long bytes) {
    return (int) Math.min(Integer.MAX_VALUE, Math.max(0, bytes / pageBytes(c)));
  }

  /** A free page's index, held once. */
  public int take() {
    return free.take();
  }

  /** One more holder of a taken page. */
  public void retain(int page) {
    free.retain(page);
  }

  /** Drops one hold of a taken page; the last frees it (the caller made sure no queued work still touches it). */
  public void give(int page) {
    free.give(page);
  }

  /** How many owners hold a taken page. */
  public int holders(int page) {
    return free.holders(page);
  }

  /** Bytes of one page in one layer of one of kPre / kRope / v. */
  long pageLayerBytes() {
    return (long) nKv * pageSize * headDim * 2;
  }

  /** Queues a copy of page {@code from} into page {@code to}, every layer, keys (both copies) and values. */
  public void copyPage(int from, int to, CudaStream stream) {
    long page = pageLayerBytes();
    for (int l = 0; l < layers; l++) {
      long base = l * layerBytes;
      for (DeviceBuffer b : new DeviceBuffer[] {kPre, kRope, v}) {
        stream.copyOnDevice(b.at(base + to * page), b.at(base + from * page), page);
      }
    }
  }

  public int freePages() {
    return free.free();
  }

  public CUdeviceptr kPre(int layer) {
    return kPre.at(layer * layerBytes);
  }

  public CUdeviceptr kRope(int layer) {
    return kRope.at(layer * layerBytes);
  }

  public CUdeviceptr v(int layer) {
    return v.at(layer * layerBytes);
  }

  @Override
  public void close() {
    kPre.close();
    kRope.close();
    v.close();
  }

  /**
   * Free page indices as a stack (lowest first out) and how many owners hold each taken page; pure
   * host logic, tested on the CPU.
   */
  public static final class FreeList {
    private final int[] stack;       // (pages) free page ids, top at count - 1
    private final int[] holders;     // (pages) owners of each page; 0: free
    private int count;

    public FreeList(int pages) {
      stack = new int[pages];
      holders = new int[pages];
      for (int i = 0; i < pages; i++) stack[i] = pages - 1 - i;
      count = pages;
    }

    public int take() {
      if (count == 0) {
        throw new IllegalStateException("KV page pool exhausted, out of memory (" + stack.length + " pages in use)");
      }
      int p = stack[--count];
      holders[p] = 1;
      return p;
    }

    public void retain(int p) {
      taken(p);
      holders[p]++;
    }

    /** Drops one hold; the last returns the page to the free stack. */
    public void give(int p) {
      taken(p);
      if (--holders[p] == 0) stack[count++] = p;
    }

    public int holders(int p) {
      return p < 0 || p >= holders.length ? 0 : holders[p];
    }

    private void taken(int p) {
      if (p < 0 || p >= stack.length || holders[p] == 0) throw new IllegalArgumentException("page " + p + " is not taken");
    }

    public int free() {
      return count;
    }
  }
}
