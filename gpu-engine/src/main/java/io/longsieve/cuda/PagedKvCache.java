package io.longsieve.cuda;

import io.longsieve.model.ModelConfig;

/**
 * One sequence's KV cache on the GPU, paged. Keys are stored before RoPE (kPre: TokenSelect scores
 * position-neutrally and re-positions what it picks); kRope holds the same keys rotated at their
 * original positions, the copy dense attention reads (as cpu/KvCache's ropedKeys). The page table
 * maps logical pages to physical ones; today it is the identity over this sequence's own pages,
 * and the kernels only ever go through it. Lengths are per layer, as compression may shrink a
 * layer. All device memory is freed on close.
 */
public final class PagedKvCache implements AutoCloseable {

  public final int layers;
  public final int nKv;
  public final int headDim;
  public final int pageSize;
  public final int pages;            // pages per layer
  public final int capacity;         // pages * pageSize slots
  private final long layerBytes;     // one layer of one of kPre/kRope/v
  private final DeviceBuffer kPre;   // (layer, page, nKv, pageSize, headDim) bf16, keys before RoPE
  private final DeviceBuffer kRope;  // (layer, page, nKv, pageSize, headDim) bf16, keys rotated at their position
  private final DeviceBuffer v;      // (layer, page, nKv, pageSize, headDim) bf16
  private final DeviceBuffer pageTable; // (pages) int, logical → physical page of every layer
  private final int[] length;        // (layer) slots in use
  private final CudaContext ctx;
  private DeviceBuffer bias;         // (layer, capacity, nKv) f32 logit bias, null until a policy asks (KV compression)

  public PagedKvCache(CudaContext ctx, ModelConfig c, int capacity) {
    this.layers = c.numLayers();
    this.nKv = c.numKvHeads();
    this.headDim = c.headDim();
    this.pageSize = Kernels.PAGE_SIZE;
    this.pages = Math.max(1, (capacity + pageSize - 1) / pageSize);
    this.capacity = pages * pageSize;
    this.layerBytes = (long) pages * nKv * pageSize * headDim * 2;
    this.length = new int[layers];
    this.ctx = ctx;
    DeviceBuffer a = null, b = null, d = null, t = null;
    try {
      a = ctx.alloc(layerBytes * layers, "KV cache keys before RoPE");
      b = ctx.alloc(layerBytes * layers, "KV cache rotated keys");
      d = ctx.alloc(layerBytes * layers, "KV cache values");
      t = ctx.alloc(pages * 4L, "KV page table");
      int[] identity = new int[pages];
      for (int i = 0; i < pages; i++) identity[i] = i;
      t.upload(identity);
    } catch (RuntimeException e) {
      for (DeviceBuffer x : new DeviceBuffer[] {a, b, d, t}) if (x != null) x.close();
      throw e;
    }
    this.kPre = a;
    this.kRope = b;
    this.v = d;
    this.pageTable = t;
  }

  /** Bytes this cache takes on the device for a given capacity (for memory planning). */
  public static long bytesFor(ModelConfig c, int capacity) {
    long pages = (capacity + Kernels.PAGE_SIZE - 1) / Kernels.PAGE_SIZE;
    return 3L * c.numLayers() * pages * c.numKvHeads() * Kernels.PAGE_SIZE * c.headDim() * 2 + pages * 4;
  }

  public Kernels.KvView layer(int l) {
    long off = l * layerBytes;
    return new Kernels.KvView(kPre.at(off), kRope.at(off), v.at(off), pageTable.ptr(), nKv, headDim, pageSize,
        bias == null ? null : bias.at((long) l * capacity * nKv * 4));
  }

  /**
   * Allocates the per-slot logit bias (zeros) on first use; from then on every layer's view
   * carries it and the decode kernels add it to their logits.
   */
  public void ensureBias() {
    if (bias != null) return;
    bias = ctx.alloc((long) layers * capacity * nKv * 4, "KV logit bias");
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
    length[layer] += n;
  }

  public void reset() {
    java.util.Arrays.fill(length, 0);
  }

  /** Bytes of keys and values in use, bf16, one copy of the keys, plus f32 logit biases (as cpu/KvCache.bf16Bytes). */
  public long bf16Bytes() {
    long slots = 0;
    for (int n : length) slots += n;
    return slots * nKv * headDim * 2L * 2L + (bias == null ? 0 : slots * nKv * 4L);
  }

  @Override
  public void close() {
    kPre.close();
    kRope.close();
    v.close();
    pageTable.close();
    if (bias != null) bias.close();
  }
}
