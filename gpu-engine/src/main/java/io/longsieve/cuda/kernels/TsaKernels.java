package io.longsieve.cuda.kernels;

import io.longsieve.cuda.driver.Launcher;
import jcuda.driver.CUdeviceptr;

/**
 * Launch wrappers of the Token Sparse Attention kernels (src/main/cuda/tsa.cu) and the per-head
 * flash prefill (prefill_attention.cu), shapes in the parameter names. Everything is queued on the
 * engine's stream; nothing here synchronises. Launch errors throw at once (see {@link Launcher}).
 * The work sizes (splits, grids) are computed by the static planning methods, unit-tested on the CPU.
 */
public final class TsaKernels {

  static final int PROXY_ROWS = 128;     // window rows per pass of a proxy block (8 warps x 16)
  static final int PROXY_THREADS = 256;
  static final int KEEP_THREADS = 512;   // tsa_keep_count: one block, TSA_KC_WARPS per-warp histograms
  static final int SELECT_THREADS = 1024;
  static final int PAGE = Kernels.PAGE_SIZE;

  private final Kernels k;
  private final Launcher l;
  private final int sms;

  public TsaKernels(Kernels k) {
    this.k = k;
    this.l = k.launcher();
    this.sms = k.smCount();
  }

  /**
   * Proxy key split: keys per block (a multiple of 64, at least 512) for about 8 blocks per
   * multiprocessor (3 are resident at a time; more, smaller blocks shorten the last wave).
   */
  public static int splitChunk(int keys, int heads, int sms) {
    int target = Math.max(1, (8 * sms + heads - 1) / heads);
    long per = ((long) keys + target - 1) / target;
    return (int) Math.max(512, (per + PAGE - 1) / PAGE * PAGE);
  }

  public static int splits(int keys, int chunk) {
    return Math.max(1, (keys + chunk - 1) / chunk);
  }

  /** Shared memory of a proxy block: the window rows and two key tiles, padded rows of d + 8 bf16. */
  public static int proxySmem(int d) {
    return (PROXY_ROWS + 2 * PAGE) * (d + 8) * 2;
  }

  /** Shared memory of tsa_keep_count: per-warp (256 bins) masses (8 B) and counts (4 B). */
  static int keepSmem() {
    return KEEP_THREADS / 32 * 256 * 12;
  }

  /** Pages of the gathered per-head cache for lists of len entries. */
  public static int gatherPages(int len) {
    return (len + PAGE - 1) / PAGE;
  }

  /** @throws IllegalArgumentException unless the GPU's TSA kernels take head size d (64 or 128) */
  public static void checkD(int d) {
    if (d != 64 && d != 128) throw new IllegalArgumentException("TSA on the GPU takes headDim 64 or 128, not " + d);
  }

  /** The proxy kernels take one cache page per key tile. */
  public static void checkCache(Kernels.KvView kv) {
    checkD(kv.headDim());
    if (kv.pageSize() != PAGE) throw new IllegalArgumentException("TSA on the GPU takes page size " + PAGE + ", not " + kv.pageSize());
  }

  /**
   * Pass 1: partMl (nHeads, splits, w, 2) f32 = per split of the keys [0, prefix + w) the softmax max
   * (log2 units) and sum of each window row (chunk rows n - w ..) of q (n, nHeads, d) bf16.
   */
  public void proxyStats(CUdeviceptr partMl, CUdeviceptr q, Kernels.KvView kv, int n, int nHeads, int w, int prefix,
                  int chunk, float scale) {
    int d = kv.headDim();
    checkD(d);
    l.launch(d == 64 ? "tsa_proxy_stats_d64" : "tsa_proxy_stats_d128", nHeads, splits(prefix + w, chunk), 1,
        PROXY_THREADS, proxySmem(d), partMl, q, kv.kRope(), kv.pageTable(), n, nHeads, kv.nKv(), w, prefix, chunk, scale);
  }

  /** rowStats (nHeads, w, 2) f32 = (max, 1 / sum) merged over the splits of partMl. */
  public void proxyCombine(CUdeviceptr rowStats, CUdeviceptr partMl, int nHeads, int splits, int w) {
    l.launch("tsa_proxy_combine", nHeads, 1, 1, 128, 0, rowStats, partMl, splits, w);
  }

  /** Pass 2: a (nHeads, prefix) f32 = sum over window rows of their softmax probability of key j. */
  public void proxyMass(CUdeviceptr a, CUdeviceptr rowStats, CUdeviceptr q, Kernels.KvView kv, int n, int nHeads, int w,
                 int prefix, int chunk, float scale) {
    int d = kv.headDim();
    checkD(d);
    l.launch(d == 64 ? "tsa_proxy_mass_d64" : "tsa_proxy_mass_d128", nHeads, splits(prefix, chunk), 1, PROXY_THREADS,
        proxySmem(d), a, rowStats, q, kv.kRope(), kv.pageTable(), n, nHeads, kv.nKv(), w, prefix, chunk, scale);
  }

  /** pooled (nHeads, prefix) f32 = avg_pool1d(a * invW, kernel, padding kernel / 2), zeros counted. */
  public void pool(CUdeviceptr pooled, CUdeviceptr a, int nHeads, int prefix, int kernel, float invW) {
    l.launch("tsa_pool", (prefix + 255) / 256, nHeads, 1, 256, 0, pooled, a, prefix, kernel, invW);
  }

  /** g (prefix) f32 = mean over heads of pooled (nHeads, prefix). */
  public void headMean(CUdeviceptr g, CUdeviceptr pooled, int prefix, int nHeads) {
    l.launch("tsa_head_mean", (prefix + 255) / 256, 1, 1, 256, 0, g, pooled, prefix, nHeads);
  }

  /** info[0] = keep (-1: dense), info[1] = n_drop; forcedKeep >= 0 writes that keep instead (after the search). */
  public void keepCount(CUdeviceptr info, CUdeviceptr g, int prefix, double tau, int min, int forcedKeep) {
    l.launch("tsa_keep_count", 1, 1, 1, KEEP_THREADS, keepSmem(), info, g, prefix, tau, min, forcedKeep);
  }

  /** lists (nHeads, keep + w) int and info[2 + h] = first entry >= before; no-op when info[0] is not a keep. */
  public void select(CUdeviceptr lists, CUdeviceptr info, CUdeviceptr pooled, int nHeads, int prefix, int w, int before) {
    l.launch("tsa_select", nHeads, 1, 1, SELECT_THREADS, 0, lists, info, pooled, prefix, w, before);
  }

  /** p (count) int = value. */
  public void fill(CUdeviceptr p, int count, int value) {
    l.launch("tsa_fill_i32", Math.max(1, Math.min(4096, (count + 255) / 256)), 1, 1, 256, 0, p, count, value, 0);
  }

  /** p (count) int = 0, 1, 2, ... (the identity page table). */
  public void iota(CUdeviceptr p, int count) {
    l.launch("tsa_fill_i32", Math.max(1, Math.min(4096, (count + 255) / 256)), 1, 1, 256, 0, p, count, 0, 1);
  }

  /**
   * kc, vc (gatherPages(len), nHeads, 64, d) bf16, qc (n, nHeads, d) bf16 and rowMap (n, nHeads) int
   * (preset to -1) from the lists (nHeads, len) and info (2 + nHeads) int of {@link #select}.
   */
  public void gather(CUdeviceptr kc, CUdeviceptr vc, CUdeviceptr qc, CUdeviceptr rowMap, CUdeviceptr lists, CUdeviceptr info,
              CUdeviceptr q, Kernels.KvView kv, int nHeads, int len, int before, int w) {
    int d = kv.headDim();
    long chunks = (long) len * (d / 8);
    int gx = (int) Math.max(1, Math.min((chunks + 255) / 256, Math.max(1, 8L * sms / nHeads + 1)));
    l.launch("tsa_gather", gx, nHeads, 1, 256, 0, kc, vc, qc, rowMap, lists, info, q, kv.kRope(), kv.v(),
        kv.pageTable(), nHeads, kv.nKv(), d, kv.pageSize(), before, w);
  }

  /**
   * oc (maxRows, nHeads, d) bf16 = causal flash attention of each head's rows qc over its gathered
   * cache kc/vc with the identity pageTable: head h has len - headFirst[h] rows (headFirst (nHeads)
   * int on the device), the largest being maxRows.
   */
  public void flashHeads(CUdeviceptr oc, CUdeviceptr qc, CUdeviceptr kc, CUdeviceptr vc, CUdeviceptr pageTable,
                  CUdeviceptr headFirst, int len, int nHeads, int d, int maxRows, float scale) {
    checkD(d);
    if (maxRows < 1) return;
    if (k.hopper()) {  // the sm_90a core: one query head per KV head (G = 1) of the gathered cache
      l.launch(d == 64 ? "attn_prefill_heads_sm90_d64" : "attn_prefill_heads_sm90_d128",
          (maxRows + Hopper.ATTN_ROWS - 1) / Hopper.ATTN_ROWS, nHeads, 1, Hopper.THREADS, Hopper.attnSmem(d),
          k.queryMap(qc, d, nHeads, maxRows, 1), k.cacheMap(kc, d), k.cacheMap(vc, d), oc, pageTable, headFirst, len, nHeads, 0, scale);
      return;
    }
    int smem = (64 + 4 * 64) * (d + 8) * 2;
    l.launch(d == 64 ? "flash_prefill_heads_d64" : "flash_prefill_heads_d128", (maxRows + 63) / 64, nHeads, 1, 128,
        smem, oc, qc, kc, vc, pageTable, headFirst, len, nHeads, 0, scale);
  }

  /** out (n, nHeads, d) bf16 = oc row rowMap[r, h] of head h, zeros where rowMap is -1. */
  public void scatter(CUdeviceptr out, CUdeviceptr oc, CUdeviceptr rowMap, int n, int nHeads, int d) {
    long chunks = (long) n * nHeads * (d / 8);
    l.launch("tsa_scatter", (int) Math.max(1, Math.min(65535, (chunks + 255) / 256)), 1, 1, 256, 0, out, oc, rowMap, n,
        nHeads, d);
  }
}
