package io.longsieve.cuda.kv;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.model.ModelConfig;

/**
 * One sequence's KV cache on the GPU, paged. Keys are stored before RoPE (kPre: TokenSelect scores
 * position-neutrally and re-positions what it picks); kRope holds the same keys rotated at their
 * original positions, the copy dense attention reads (as cpu/kernels/KvCache's ropedKeys). The pages come
 * from a {@link KvPagePool}: a private one holding every page (the plain constructor: the page
 * table is the identity) or a shared one, whose pages are taken as the sequence grows
 * ({@link #reserve}) and given back when compression shrank it ({@link #shrink}) or on close; the
 * kernels only ever go through the page table. Lengths are per layer, as compression may shrink a
 * layer. Failure semantics: {@link #reserve} throws IllegalStateException when the capacity or the
 * pool is exhausted, leaving the pages it took mapped.
 *
 * <p>Prefix reuse (shared pool only): {@link #keep} holds the full pages of a prompt prefix by
 * reference and copies the page it ends in; {@link #fork} starts a cache from such a prefix, holding
 * the same full pages and its own copy of the last one (copy on write: appends only write after the
 * prefix). A cache whose slots are rewritten in place (KV compression) first calls {@link #unshare}.
 */
public final class PagedKvCache implements AutoCloseable {

  public final int layers;
  public final int nKv;
  public final int nHeads;           // query heads: the logit bias's row length
  public final int headDim;
  public final int pageSize;
  public final int pages;            // logical pages per layer
  public final int capacity;         // pages * pageSize slots
  private final KvPagePool pool;     // where the pages live (kPre, kRope, v of every layer)
  private final boolean ownsPool;    // a private pool: closed with the cache
  private final int[] table;         // (pages) logical → pool page, valid below `mapped`
  private int mapped;                // logical pages backed by a pool page
  private final DeviceBuffer pageTable; // (pages) int, logical → pool page of every layer
  private final int[] length;        // (layer) slots in use
  private final CudaContext ctx;
  private DeviceBuffer bias;         // (layer, capacity, nHeads) f32 logit bias per query head, null until a policy asks
                                     //   (SelKV's compensation)

  /** The context whose memory the cache is in. */
  public CudaContext context() {
    return ctx;
  }

  public PagedKvCache(CudaContext ctx, ModelConfig c, int capacity) {
    this(ctx, c, capacity, null);
  }

  /** A cache whose pages come from a shared pool (taken on demand), or a private one when pool is null. */
  public PagedKvCache(CudaContext ctx, ModelConfig c, int capacity, KvPagePool shared) {
    this.layers = c.numLayers();
    this.nKv = c.numKvHeads();
    this.nHeads = c.numHeads();
    this.headDim = c.headDim();
    this.pageSize = Kernels.PAGE_SIZE;
    this.pages = Math.max(1, (capacity + pageSize - 1) / pageSize);
    this.capacity = pages * pageSize;
    this.length = new int[layers];
    this.ctx = ctx;
    this.table = new int[pages];
    this.ownsPool = shared == null;
    if (shared != null && (shared.layers != layers || shared.nKv != nKv || shared.headDim != headDim)) {
      throw new IllegalArgumentException("the page pool holds another model's shapes");
    }
    this.pool = shared != null ? shared : new KvPagePool(ctx, c, pages);
    try {
      this.pageTable = ctx.alloc(pages * 4L, "KV page table");
    } catch (RuntimeException e) {
      if (ownsPool) pool.close();
      throw e;
    }
    if (ownsPool) {
      for (int i = 0; i < pages; i++) table[i] = pool.take();  // 0, 1, ...: the identity
      mapped = pages;
    }
    pageTable.upload(table);
  }

  /**
   * A cache of {@code capacity} slots in the shared pool of {@code prefix} whose first
   * {@code prefix.tokens()} slots of every layer are the prefix's: its full pages held by reference, its
   * last partial page copied (queued on stream). Append after them as after a prefill of that length.
   */
  public static PagedKvCache fork(CudaContext ctx, ModelConfig c, int capacity, KeptPages prefix, CudaStream stream) {
    PagedKvCache kv = new PagedKvCache(ctx, c, capacity, prefix.pool());
    try {
      int[] full = prefix.full();
      if (prefix.tokens() > kv.capacity) throw new IllegalArgumentException("prefix over the cache's capacity");
      for (int p : full) {
        kv.pool.retain(p);
        kv.table[kv.mapped++] = p;
      }
      if (prefix.partial() >= 0) {
        int own = kv.pool.take();
        kv.table[kv.mapped++] = own;
        kv.pool.copyPage(prefix.partial(), own, stream);
      }
      kv.pageTable.upload(kv.table);
      java.util.Arrays.fill(kv.length, prefix.tokens());
      return kv;
    } catch (RuntimeException | Error e) {
      kv.close();
      throw e;
    }
  }

  /**
   * Keeps this cache's first {@code tokens} slots (every layer holds exactly that many, nothing
   * compacted): the full pages by reference, the partial last page copied (queued on stream), so
   * this cache may go on appending or close.
   *
   * @throws IllegalStateException with a private pool, or when the layers hold another length
   */
  public KeptPages keep(int tokens, CudaStream stream) {
    if (ownsPool) throw new IllegalStateException("only a cache in a shared page pool can keep a prefix");
    for (int n : length) if (n != tokens) throw new IllegalStateException("a layer holds " + n + " slots, not " + tokens);
    if (bias != null) throw new IllegalStateException("a compressed cache keeps no prefix");
    int[] full = java.util.Arrays.copyOf(table, tokens / pageSize);
    for (int p : full) pool.retain(p);
    int partial = -1;
    try {
      if (tokens % pageSize != 0) {
        partial = pool.take();
        pool.copyPage(table[full.length], partial, stream);
      }
    } catch (RuntimeException | Error e) {
      for (int p : full) pool.give(p);
      throw e;
    }
    return new KeptPages(ctx, pool, full, partial, tokens);
  }

  /**
   * Copies every page another owner also holds (a kept prefix, a fork) into a page of its own, so
   * this cache may rewrite its slots in place (compression); the others keep what they read.
   */
  public void unshare(CudaStream stream) {
    if (ownsPool) return;
    boolean changed = false;
    for (int i = 0; i < mapped; i++) {
      if (pool.holders(table[i]) < 2) continue;
      int own = pool.take();
      pool.copyPage(table[i], own, stream);
      pool.give(table[i]);  // others still hold it: it stays in use
      table[i] = own;
      changed = true;
    }
    if (changed) pageTable.upload(table);
  }

  /**
   * Makes sure every layer can take {@code more} slots beyond its length: takes pool pages for the
   * logical pages that will be written (a no-op with a private pool). Call before appending.
   */
  public void reserve(int more) {
    int need = 0;
    for (int n : length) need = Math.max(need, n);
    long slots = (long) need + more;
    if (slots > capacity) throw new IllegalStateException("KV cache full: " + slots + " > " + capacity);
    int needPages = (int) ((slots + pageSize - 1) / pageSize);
    if (needPages <= mapped) return;
    try {
      while (mapped < needPages) {
        table[mapped] = pool.take();
        mapped++;
      }
    } finally {
      pageTable.upload(table);  // only entries no queued kernel reads change
    }
  }

  /**
   * Gives back the pages beyond the longest layer to a shared pool (after compression; a private
   * pool keeps them: its memory cannot go anywhere else). Synchronises the context first: queued
   * kernels may still read the pages.
   */
  public void shrink() {
    if (ownsPool) return;
    int need = 0;
    for (int n : length) need = Math.max(need, n);
    int keep = (need + pageSize - 1) / pageSize;
    if (keep >= mapped) return;
    ctx.synchronize();
    for (int i = keep; i < mapped; i++) pool.give(table[i]);
    mapped = keep;
  }

  /** Pool pages this sequence holds. */
  public int mappedPages() {
    return mapped;
  }

  /** Device bytes this sequence holds: its pool pages (kPre, kRope, v), page table and bias. */
  public long deviceBytes() {
    return mapped * KvPagePool.pageBytes(layers, nKv, headDim) + pages * 4L
        + (bias == null ? 0 : (long) layers * capacity * nHeads * 4);
  }

  /** Pages of the pool behind this cache (the physical extent of each layer's buffers). */
  public int poolPages() {
    return pool.pages;
  }

  /** Bytes between consecutive layers of kPre / kRope / v in the pool (a batched decode step's layer stride). */
  public long layerBytes() {
    return pool.layerBytes;
  }

  /** Whether every layer holds the same number of slots (nothing compacted one layer apart). */
  public boolean uniformLength() {
    for (int n : length) if (n != length[0]) return false;
    return true;
  }

  /** Bytes this cache takes on the device for a given capacity (for memory planning). */
  public static long bytesFor(ModelConfig c, int capacity) {
    long pages = (capacity + Kernels.PAGE_SIZE - 1) / Kernels.PAGE_SIZE;
    return 3L * c.numLayers() * pages * c.numKvHeads() * Kernels.PAGE_SIZE * c.headDim() * 2 + pages * 4;
  }

  public Kernels.KvView layer(int l) {
    return new Kernels.KvView(pool.kPre(l), pool.kRope(l), pool.v(l), pageTable.ptr(), nKv, headDim, pageSize,
        bias == null ? null : bias.at((long) l * capacity * nHeads * 4));
  }

  /**
   * Allocates the per-slot, per-query-head logit bias (zeros) on first use; from then on every layer's view
   * carries it and the decode kernels add it to their logits.
   */
  public void ensureBias() {
    if (bias != null) return;
    bias = ctx.alloc((long) layers * capacity * nHeads * 4, "KV logit bias");
    bias.fill32(0);
  }

  public boolean hasBias() {
    return bias != null;
  }

  /** Sets a layer's length after a policy compacted it on the device. */
  public void setLength(int layer, int n) {
    if (n < 0 || n > capacity) throw new IllegalArgumentException("length " + n + " outside [0, " + capacity + "]");
    length[layer] = n;
  }

  public int length(int layer) {
    return length[layer];
  }

  /** Records n more slots in use on a layer after the kernels appended them. */
  public void advance(int layer, int n) {
    if (length[layer] + n > capacity) throw new IllegalStateException("KV cache full: " + (length[layer] + n) + " > " + capacity);
    if (length[layer] + n > mapped * pageSize) {
      throw new IllegalStateException("slots beyond the reserved pages: call reserve before appending");
    }
    length[layer] += n;
  }

  public void reset() {
    java.util.Arrays.fill(length, 0);
  }

  /** Bytes of keys and values in use, bf16, one copy of the keys, plus f32 logit biases (as cpu/kernels/KvCache.bf16Bytes). */
  public long bf16Bytes() {
    long slots = 0;
    for (int n : length) slots += n;
    return slots * nKv * headDim * 2L * 2L + (bias == null ? 0 : slots * nHeads * 4L);
  }

  @Override
  public void close() {
    if (ownsPool) {
      pool.close();
    } else if (mapped > 0) {
      ctx.synchronize();  // queued kernels may still use the pages
      for (int i = 0; i < mapped; i++) pool.give(table[i]);
    }
    mapped = 0;
    pageTable.close();
    if (bias != null) bias.close();
  }
}
