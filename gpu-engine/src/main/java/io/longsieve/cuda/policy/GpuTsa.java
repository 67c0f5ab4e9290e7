package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.TsaKernels;
import io.longsieve.policy.LayerList;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import io.longsieve.policy.TsaKeep;
import io.longsieve.policy.TsaSelections;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/**
 * Token Sparse Attention for prefill on the GPU: what cpu/policy/TokenSparseAttention computes on
 * the CPU (research/algorithms.md §2.3), with the same parameters (tau, min, window, pool, layers),
 * activation condition and statistics; {@code keep=F} (a benchmark knob, {@link TsaKeep}) fixes the
 * keep count on both; the engine prefills a TSA request in chunks of the policy's {@code chunk} on both
 * backends (PolicySpec.prefillChunk). On a sparse layer and chunk (N cached slots, W' = min(window,
 * n) window rows, prefix = N − W'): two-pass proxy attention of the window rows on tensor cores,
 * avg-pooling, head mean, the cumulative-mass cut-off by radix select, per-head top-keep ++ window,
 * then per query head a gather of its list into a dense cache, flash prefill over it for the head's
 * queries (a suffix of its list) and a scatter back, zeros for the head's other rows (tsa.cu).
 *
 * <p>Failure semantics: the constructor throws IllegalArgumentException for a bad layers value (as
 * the CPU); a sparse chunk with a head size other than 64/128 or a cache page size other than 64
 * throws IllegalArgumentException before queuing anything; CUDA errors propagate from the call that
 * queued the work. <b>One host synchronisation per sparse layer and chunk</b>: the keep count and
 * each head's first query entry are copied to the host to size the gather and the attention grid
 * (the official code synchronises there too). Dense layers and chunks queue their work without
 * synchronising. Device buffers grow on demand (growing synchronises once) and are freed by close.
 * Not thread-safe: one sequence.
 */
public final class GpuTsa implements GpuParts.Prefill {

  private final SelectionStats stats;
  private final GpuEnv env;
  private final TsaKernels tk;
  private final double tau;
  private final double keepFraction; // > 0: keep this share of the prefix instead of tau's cut-off
  private final int min, window, pool;
  private final boolean[] sparse;  // (layer) this layer may be made sparse
  private final int heads, d;
  private final int[] info;        // (2 + heads) host copy: keep, n_drop, first query entry per head
  private final SelectionTimer timer; // selection_ms: the proxy and the cut-off, in device time

  private final Grow partMl = new Grow("tsa proxy partials");  // (heads, splits, w, 2) f32
  private final Grow rowStats = new Grow("tsa row stats");     // (heads, w, 2) f32 max (log2), 1 / sum
  private final Grow mass = new Grow("tsa proxy mass");        // (heads, prefix) f32 summed probabilities
  private final Grow pooled = new Grow("tsa pooled");          // (heads, prefix) f32 pooled proxy rows
  private final Grow global = new Grow("tsa head mean");       // (prefix) f32
  private final Grow infoDev = new Grow("tsa info");           // (2 + heads) int
  private final Grow lists = new Grow("tsa lists");            // (heads, keep + w) int ascending slots
  private final Grow rowMap = new Grow("tsa row map");         // (n, heads) int gathered row or -1
  private final Grow qc = new Grow("tsa gathered q");          // (n, heads, d) bf16
  private final Grow oc = new Grow("tsa gathered out");        // (n, heads, d) bf16
  private final Grow kc = new Grow("tsa gathered k");          // (pages, heads, 64, d) bf16
  private final Grow vc = new Grow("tsa gathered v");          // (pages, heads, 64, d) bf16
  private final Grow ident = new Grow("tsa page table");       // (pages) int identity
  private int identPages;

  public GpuTsa(PolicyTerm t, SelectionStats stats, GpuEnv env) {
    this.stats = stats;
    this.env = env;
    this.tk = new TsaKernels(env.k());
    tau = t.doubleParam("tau");
    keepFraction = t.doubleParam("keep");
    min = t.intParam("min");
    window = t.intParam("window");
    pool = t.intParam("pool");
    sparse = LayerList.resolve(t.text("layers"), env.config().numLayers(), env.modelDir());
    heads = env.config().numHeads();
    d = env.config().headDim();
    info = new int[2 + heads];
    timer = new SelectionTimer(env.k().stream());
  }

  @Override
  public void collect() {
    timer.collect(stats);
  }

  /** The resolved sparse layers, e.g. {@code 2-3}. */
  String layerList() {
    return LayerList.format(sparse);
  }

  /** The CPU's activation condition: a sparse layer, more than one query, tau > 0 or a fixed keep, N > min + window. */
  static boolean active(boolean sparseLayer, int n, int end, double tau, double keep, int min, int window) {
    int w = Math.min(window, n);
    return sparseLayer && n > 1 && w >= 1 && (tau > 0 || TsaKeep.fixed(keep)) && end > min + window;
  }

  @Override
  public void prefill(LayerCall c) {
    int n = c.n(), end = c.before() + n, w = Math.min(window, n);
    if (!active(sparse[c.layer()], n, end, tau, keepFraction, min, window)) {
      dense(c);
      return;
    }
    CudaStream.Event t0 = timer.start();
    int prefix = end - w;
    proxy(c, w, prefix);
    int keep = select(c, w, prefix, TsaKeep.fixed(keepFraction) ? TsaKeep.count(prefix, keepFraction, min) : -1);
    timer.stop(t0);
    if (keep < 0 || keep >= prefix) {
      dense(c);
      return;
    }
    stats.markSparse(c.layer());
    if (TsaSelections.active()) {  // tests only: reads the lists back (synchronises)
      TsaSelections.report(c.layer(), c.pos0(), downloadLists(keep + w), heads, keep + w, c.pos0() - c.before());
    }
    attend(c, w, keep);
    double attended = 0;
    for (int h = 0; h < heads; h++) attended += attendedPairs(keep + w, info[2 + h]);
    stats.prefill(c.layer(), attended, SelectionStats.densePairs(n, c.before(), heads));
  }

  /** Pairs one head attends: its list entries f .. len - 1 are queries, entry e attends e + 1 keys. */
  static double attendedPairs(int len, int f) {
    return ((long) len * (len + 1) - (long) f * (f + 1)) / 2.0;
  }

  private void dense(LayerCall c) {
    env.k().attention(c.out(), c.q(), c.kv(), c.n(), heads, c.before(), env.config().window(c.layer()), env.scale(),
        env.ws());
    double pairs = SelectionStats.densePairs(c.n(), c.before(), heads);
    stats.prefill(c.layer(), pairs, pairs);
  }

  /** Proxy attention of the w window rows, pooled, and the head mean: queued, no synchronisation. */
  public void proxy(LayerCall c, int w, int prefix) {
    TsaKernels.checkCache(c.kv());
    int sms = env.k().smCount();
    int chunk1 = TsaKernels.splitChunk(prefix + w, heads, sms), splits1 = TsaKernels.splits(prefix + w, chunk1);
    int chunk2 = TsaKernels.splitChunk(prefix, heads, sms);
    CUdeviceptr part = partMl.need((long) heads * splits1 * w * 2 * 4), rs = rowStats.need((long) heads * w * 2 * 4);
    CUdeviceptr a = mass.need((long) heads * prefix * 4), p = pooled.need((long) heads * prefix * 4);
    tk.proxyStats(part, c.q(), c.kv(), c.n(), heads, w, prefix, chunk1, env.scale());
    tk.proxyCombine(rs, part, heads, splits1, w);
    tk.proxyMass(a, rs, c.q(), c.kv(), c.n(), heads, w, prefix, chunk2, env.scale());
    tk.pool(p, a, heads, prefix, pool, 1f / w);
    tk.headMean(global.need((long) prefix * 4), p, prefix, heads);
  }

  /**
   * The keep count (tau's cut-off, or forcedKeep &gt;= 0 as is) and the per-head lists; synchronises
   * once and leaves keep, n_drop and each head's first query entry in {@link #info}. Returns keep
   * (-1: nothing to drop).
   */
  public int select(LayerCall c, int w, int prefix, int forcedKeep) {
    CUdeviceptr inf = infoDev.need((2L + heads) * 4);
    tk.keepCount(inf, global.need((long) prefix * 4), prefix, tau, min, forcedKeep);
    tk.select(lists.need((long) heads * (prefix + w) * 4), inf, pooled.need((long) heads * prefix * 4), heads, prefix, w,
        c.before());
    env.k().stream().copyToHost(Pointer.to(info), infoDev.buf, 0, info.length * 4L);
    env.k().stream().synchronize();
    return info[0];
  }

  /** Gather, per-head flash prefill, scatter for the lists of {@link #select} (keep = info[0]). */
  public void attend(LayerCall c, int w, int keep) {
    int n = c.n(), len = keep + w, pages = TsaKernels.gatherPages(len), maxRows = 0;
    for (int h = 0; h < heads; h++) maxRows = Math.max(maxRows, len - info[2 + h]);
    long pageBytes = (long) heads * Kernels.PAGE_SIZE * d * 2;
    CUdeviceptr k = kc.need(pages * pageBytes), v = vc.need(pages * pageBytes);
    CUdeviceptr q = qc.need((long) n * heads * d * 2), o = oc.need((long) n * heads * d * 2);
    CUdeviceptr map = rowMap.need((long) n * heads * 4), table = ident.need(pages * 4L);
    if (pages > identPages) {
      tk.iota(table, (int) (ident.buf.bytes() / 4));
      identPages = (int) (ident.buf.bytes() / 4);
    }
    CUdeviceptr inf = infoDev.buf.ptr();
    tk.fill(map, n * heads, -1);
    tk.gather(k, v, q, map, lists.buf.ptr(), inf, c.q(), c.kv(), heads, len, c.before(), w);
    tk.flashHeads(o, q, k, v, table, inf.withByteOffset(8), len, heads, d, maxRows, env.scale());
    tk.scatter(c.out(), o, map, n, heads, d);
  }

  /** Tests: keep, n_drop and each head's first query entry of the last sparse call (host copy). */
  int[] lastInfo() {
    return info.clone();
  }

  /** Tests: the last sparse call's lists (heads, len) int; synchronises. */
  int[] downloadLists(int len) {
    return lists.buf.downloadInts(heads * len);
  }

  @Override
  public void close() {
    timer.close();
    for (Grow g : new Grow[] {partMl, rowStats, mass, pooled, global, infoDev, lists, rowMap, qc, oc, kc, vc, ident}) {
      g.close();
    }
    identPages = 0;
  }

  /** A device buffer that grows on demand (by 25 % more, so a growing context rarely reallocates). */
  private final class Grow implements AutoCloseable {
    private final String what;
    DeviceBuffer buf;

    Grow(String what) {
      this.what = what;
    }

    CUdeviceptr need(long bytes) {
      if (buf == null || buf.bytes() < bytes) {
        if (buf != null) {
          env.ctx().synchronize();  // queued work may still read the old buffer
          buf.close();
          if (this == ident) identPages = 0;
        }
        buf = env.ctx().alloc(Math.max(256, bytes + bytes / 4), what);
      }
      return buf.ptr();
    }

    @Override
    public void close() {
      if (buf != null) buf.close();
      buf = null;
    }
  }
}
