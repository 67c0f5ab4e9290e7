package io.longsieve.cuda.kernels;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.driver.KernelModule;
import io.longsieve.cuda.driver.Launcher;
import io.longsieve.cuda.driver.TensorMaps;
import jcuda.driver.CUdeviceptr;

/**
 * Typed launches of the project's kernels (src/main/cuda), one method per operation, shapes in the
 * parameter names. Everything is asynchronous on the stream given at construction. The CPU twin of
 * each is named in its kernel file; the parity tests (src/test/.../cuda) hold them together.
 */
public final class Kernels {

  public static final int OUT_F32 = 0;
  public static final int OUT_F32_ADD = 1;
  public static final int OUT_BF16 = 2;
  /** gemm_sm90 only: out (m, n / 2) bf16 = silu(gate) * up, w's rows [gate | up]; see {@link #gateUpSwiglu}. */
  static final int OUT_SWIGLU = 3;

  /** Most rows the GEMV takes: matmul streams the weights once up to here, the tensor-core GEMM runs above. */
  static final int GEMV_MAX_ROWS = 8;

  /** Page size of the KV cache; the tensor-core attention kernel takes one page per key tile. */
  public static final int PAGE_SIZE = 64;

  private static final int GEMM_SMEM = 3 * (128 + 128) * 72 * 2;  // stages x (A + W tiles) x padded row, bf16
  private static final int GEMM_SMEM_2 = 2 * (128 + 128) * 72 * 2; // the 2-stage variant for 99 KB GPUs
  private static final int SPLIT_THREADS = 256;

  private final Launcher l;
  private final int smCount;
  private final boolean hopper;        // the sm_90a kernels (hopper/*.cu): wgmma, TMA
  private final TensorMaps maps;       // null unless hopper: other GPUs never bind libcuda through JNA
  private final Gemv gemv;              // the decode GEMV every call of this instance runs

  /** Kernels for an engine that batches up to 8 sequences a step (the decode GEMV for that). */
  public Kernels(KernelModule module, CudaStream stream) {
    this(module, stream, Gemv.forBatch(GEMV_MAX_ROWS));
  }

  public Kernels(KernelModule module, CudaStream stream, Gemv gemv) {
    this(module, stream, Hopper.usable(module), gemv);
  }

  /** hopper false keeps the sm_80 kernels on any GPU (parity tests run both paths on an H200). */
  public Kernels(KernelModule module, CudaStream stream, boolean hopper) {
    this(module, stream, hopper, Gemv.forBatch(GEMV_MAX_ROWS));
  }

  private Kernels(KernelModule module, CudaStream stream, boolean hopper, Gemv gemv) {
    if (hopper && !Hopper.supported(module)) {
      throw new IllegalArgumentException("the sm_90a kernels need " + Hopper.requirement() + "; "
          + module.context().describe() + " has compute capability " + module.context().computeCapability());
    }
    this.l = new Launcher(module, stream);
    this.smCount = module.context().smCount();
    this.hopper = hopper;
    this.maps = hopper ? new TensorMaps(module.context()) : null;
    this.gemv = gemv;
  }

  /** Whether prefill GEMMs and attention run the sm_90a (wgmma + TMA) kernels. */
  public boolean hopper() {
    return hopper;
  }


  public CudaStream stream() {
    return l.stream();
  }

  /**
   * Runs work with every launch of these kernels (and of the families sharing the launcher) queued on
   * branch, grid-barrier kernels ordered through order (Launcher.onBranch).
   */
  public void onBranch(CudaStream branch, CudaStream.Event order, Runnable work) {
    l.onBranch(branch, order, work);
  }

  /** The launcher, shared by the other kernel families' wrappers (ListKernels, ...). */
  Launcher launcher() {
    return l;
  }

  /** The tensor maps of the sm_90a kernels (Fp8Kernels' GEMM); null unless {@link #hopper}. */
  TensorMaps maps() {
    return maps;
  }

  public int smCount() {
    return smCount;
  }

  /** x (n, dim) f32 = table (vocab, dim) bf16 rows of tokens (n) int. */
  public void embed(CUdeviceptr x, CUdeviceptr table, CUdeviceptr tokens, int n, int dim, int vocab) {
    l.launch("embed_rows", n, 1, 1, 256, 0, x, table, tokens, dim, vocab);
  }

  /** out (n, dim) bf16 = rmsnorm(x (n, dim) f32) * w (dim) f32. */
  public void rmsNorm(CUdeviceptr out, CUdeviceptr x, CUdeviceptr w, int n, int dim, double eps) {
    l.launch("rmsnorm_rows", n, 1, 1, dim >= 2048 ? 1024 : 256, 0, out, x, w, dim, eps);
  }

  /**
   * out (n, heads, headDim) bf16 = RoPE of in (rows of inStride f32); row i at positions[i] when
   * positions (n) int is non-null, else at pos0 + i.
   */
  public void rope(CUdeviceptr out, CUdeviceptr in, int inStride, int n, int heads, int headDim, CUdeviceptr invFreq,
                   CUdeviceptr positions, int pos0) {
    l.launch("rope_rows", n, (heads * headDim / 2 + 255) / 256, 1, 256, 0, out, in, inStride, heads, headDim, invFreq,
        positions, pos0);
  }

  /**
   * Appends n rows of keys (before RoPE) and values from qkv (rows of stride f32, keys at kOff,
   * values at vOff) to one layer of the paged cache at slots slot0.., positions pos0...
   */
  public void kvAppend(KvView kv, CUdeviceptr qkv, int stride, int kOff, int vOff, int n, int slot0, int pos0,
                       CUdeviceptr invFreq) {
    l.launch("kv_append", n, (kv.nKv() * kv.headDim() / 2 + 255) / 256, 1, 256, 0, kv.kPre(), kv.kRope(), kv.v(), qkv, stride, kOff, vOff, kv.nKv(),
        kv.headDim(), kv.pageSize(), kv.pageTable(), slot0, pos0, invFreq);
  }

  /** out (n, hidden) bf16 = silu(gate) * up, gu (n, 2 * hidden) bf16 holding [gate | up]. */
  public void swiglu(CUdeviceptr out, CUdeviceptr gu, int n, int hidden) {
    l.launch("swiglu_rows", n, (hidden + 255) / 256, 1, 256, 0, out, gu, hidden);
  }

  /**
   * The feed-forward block's first half: out (m, hidden) bf16 = silu(gate) * up, where gate and up
   * (m, hidden) are a (m, k) bf16 . wgu (2 hidden, k)^T bf16 rounded to bf16, wgu's rows [gate | up].
   * On sm_90a, where matmul runs the GEMM (m > 8) and hidden is a multiple of 128, the GEMM's epilogue applies the SwiGLU
   * (OUT_SWIGLU), so the (m, 2 hidden) intermediate never goes through memory; otherwise the
   * GEMM writes it to gu (m, 2 hidden) bf16 and swiglu_rows reads it. Both paths give the same bits.
   */
  public void gateUpSwiglu(CUdeviceptr out, CUdeviceptr gu, CUdeviceptr a, CUdeviceptr wgu, int m, int hidden, int k) {
    if (fusesSwiglu(m, hidden)) {
      checkK(k);
      gemmSm90(out, OUT_SWIGLU, a, wgu, null, m, 2 * hidden, k);
    } else {
      matmul(gu, OUT_BF16, a, wgu, null, m, 2 * hidden, k);
      swiglu(out, gu, m, hidden);
    }
  }

  /** Whether {@link #gateUpSwiglu} runs as one fused GEMM for m rows (tests check both paths). */
  public boolean fusesSwiglu(int m, int hidden) {
    return hopper && m > GEMV_MAX_ROWS && hidden % 128 == 0;
  }

  /** Rows of the gu scratch that {@link #gateUpSwiglu} needs for calls of up to maxRows rows: only unfused calls use it. */
  public long swigluScratchRows(long maxRows, int hidden) {
    return fusesSwiglu(GEMV_MAX_ROWS + 1, hidden) ? Math.min(maxRows, GEMV_MAX_ROWS) : maxRows;
  }

  /**
   * out (m, n) (mode: f32, f32 +=, bf16) = a (m, k) bf16 . w (n, k)^T bf16 + bias (n) f32 or null.
   * m <= 8 streams w once (GEMV); larger m runs the tensor-core GEMM.
   */
  public void matmul(CUdeviceptr out, int mode, CUdeviceptr a, CUdeviceptr w, CUdeviceptr bias, int m, int n, int k) {
    if (m <= GEMV_MAX_ROWS) gemv(out, mode, a, w, bias, m, n, k);
    else gemm(out, mode, a, w, bias, m, n, k);
  }

  public void gemm(CUdeviceptr out, int mode, CUdeviceptr a, CUdeviceptr w, CUdeviceptr bias, int m, int n, int k) {
    checkK(k);
    if (hopper) {
      gemmSm90(out, mode, a, w, bias, m, n, k);
      return;
    }
    boolean three = l.context().maxSharedPerBlockOptin() >= GEMM_SMEM;
    l.launch(three ? "gemm_bf16" : "gemm_bf16_s2", ((n + 127) / 128) * ((m + 127) / 128), 1, 1, 256,
        three ? GEMM_SMEM : GEMM_SMEM_2, out, a, w, bias, m, n, k, mode);
  }

  /**
   * gemm_sm90 (hopper/gemm_sm90.cu): a persistent grid of at most one block per multiprocessor over
   * tiles of 128 rows by 256 weight rows, A and W read by TMA through tensor maps (boxes of 128 and
   * 256 rows by 64). With OUT_SWIGLU a tile's 256 weight rows are 128 gate rows and the 128 matching
   * up rows, two boxes of 128, so the output has n / 2 columns.
   */
  private void gemmSm90(CUdeviceptr out, int mode, CUdeviceptr a, CUdeviceptr w, CUdeviceptr bias, int m, int n, int k) {
    int wBox = mode == OUT_SWIGLU ? 128 : 256;
    CUdeviceptr ma = maps.matrix(a, m, k, 2L * k, 128), mw = maps.matrix(w, n, k, 2L * k, wBox);
    long tiles = (long) ((m + 127) / 128) * ((n + 255) / 256);
    l.launch("gemm_sm90", (int) Math.min(tiles, smCount), 1, 1, Hopper.THREADS, Hopper.GEMM_SMEM, ma, mw, out, bias, m,
        n, k, mode, Hopper.gemmRowGroup(m));
  }

  /** The decode GEMV, out (m, n) = a (m, k) . w (n, k)^T for 1 <= m <= 8, through this instance's {@link Gemv}. */
  public void gemv(CUdeviceptr out, int mode, CUdeviceptr a, CUdeviceptr w, CUdeviceptr bias, int m, int n, int k) {
    if (gemv == Gemv.CUDA_CORES) gemvSimt(out, mode, a, w, bias, m, n, k, gemvColumns(m));
    else gemvMma(out, mode, a, w, bias, m, n, k, gemvWarps(n));
  }

  /**
   * Warps per 16 output columns in gemv_mma for n columns: 16 below 1024 column tiles (each warp a
   * shorter share of K, so the smaller grid keeps enough loads in flight), else 8. A function of n
   * alone, so a row's bits do not depend on the batch.
   */
  public static int gemvWarps(int n) {
    return (n + 15) / 16 >= 1024 ? 8 : 16;
  }

  /** gemv_mma_w{warps} (gemm/gemm.cu), warps 8 or 16 (which split K differently, so give other bits). */
  public void gemvMma(CUdeviceptr out, int mode, CUdeviceptr a, CUdeviceptr w, CUdeviceptr bias, int m, int n, int k,
                      int warps) {
    checkK(k);
    if (m < 1 || m > GEMV_MAX_ROWS) throw new IllegalArgumentException("gemv takes 1.." + GEMV_MAX_ROWS + " rows, not " + m);
    if (warps != 8 && warps != 16) throw new IllegalArgumentException("warps " + warps);
    l.launch("gemv_mma_w" + warps, (n + 15) / 16, 1, 1, 32 * warps, 0, out, a, w, bias, m, n, k, mode);
  }

  /**
   * Output columns per group of 4 warps in the CUDA-core GEMV for m rows: more columns reuse each activation
   * load (which the batch multiplies) for more weight rows. Measured on the H200 (bench "gemv" rows).
   */
  public static int gemvColumns(int m) {
    return m == 1 ? 1 : m == 2 ? 2 : 4;
  }

  /** The CUDA-core GEMV with an explicit column count per warp group (1, 2 or 4). Same bits for every count. */
  public void gemvSimt(CUdeviceptr out, int mode, CUdeviceptr a, CUdeviceptr w, CUdeviceptr bias, int m, int n, int k,
                       int columns) {
    checkK(k);
    if (m < 1 || m > GEMV_MAX_ROWS) throw new IllegalArgumentException("gemv takes 1.." + GEMV_MAX_ROWS + " rows, not " + m);
    if (columns != 1 && columns != 2 && columns != 4) throw new IllegalArgumentException("columns " + columns);
    int rows = m == 1 ? 1 : m == 2 ? 2 : m <= 4 ? 4 : 8;
    // 8 warps a block: 2 groups of 4, each `columns` output columns
    l.launch("gemv_bf16_b" + rows + "_c" + columns, (n + 2 * columns - 1) / (2 * columns), 1, 1, 256, 0, out, a, w, bias,
        m, n, k, mode);
  }

  private static void checkK(int k) {
    if (k % 8 != 0) throw new IllegalArgumentException("inner dimension " + k + " must be a multiple of 8");
  }

  /**
   * Dense causal attention of n query rows q (n, nHeads, headDim) bf16, already rotated, sitting at
   * slots before .. before + n - 1 of the layer; out (n, nHeads, headDim) bf16. Tensor cores for
   * multi-row calls with headDim 64 or 128, flash decoding otherwise.
   */
  public void attention(CUdeviceptr out, CUdeviceptr q, KvView kv, int n, int nHeads, int before, int window,
                        float scale, Workspace ws) {
    boolean tensorCores = kv.pageSize() == PAGE_SIZE && flashDecodes(kv.headDim(), nHeads / kv.nKv());
    if (tensorCores && n > 1) flashPrefill(out, q, kv, n, nHeads, before, window, scale);
    else if (tensorCores) flashDecode(out, q, kv, n, nHeads, before, window, scale, ws);
    else splitAttention(out, q, kv, n, nHeads, before, window, scale, ws);
  }

  /**
   * Flash decoding on tensor cores: the group's query heads form one mma tile, warps stream the
   * split's 32-key tiles, then {@code attn_combine} merges the splits (headDim 64 or 128). Adds
   * kv's logit bias when it carries one.
   */
  public void flashDecode(CUdeviceptr out, CUdeviceptr q, KvView kv, int n, int nHeads, int before, int window,
                          float scale, Workspace ws) {
    int d = kv.headDim(), g = nHeads / kv.nKv();
    if ((d != 64 && d != 128) || kv.pageSize() != PAGE_SIZE || g > 16) {
      throw new IllegalArgumentException("flash decode takes headDim 64/128, page size 64, <= 16 heads per KV head");
    }
    SplitPlan p = decodePlan(n, before + n, kv.nKv(), smCount);
    long partO = (long) n * nHeads * p.splits() * d, partMl = (long) n * nHeads * p.splits() * 2;
    DeviceBuffer w = ws.ensure((partO + partMl) * 4);
    CUdeviceptr o = w.ptr(), ml = w.at(partO * 4);
    int smem = (16 + 4 * 2 * 2 * 32) * (d + 8) * 2;
    l.launch(d == 64 ? "flash_decode_d64" : "flash_decode_d128", kv.nKv(), p.splits(), n, 128, smem, o, ml, q, kv.kRope(),
        kv.v(), kv.pageTable(), nHeads, kv.nKv(), before, window, p.chunk(), scale, kv.bias());
    combine(out, o, ml, n, nHeads, p.splits(), d);
  }

  /** Threads of attn_combine's blocks (AC_THREADS in split_attention.cu): one per (head, four dims) of a row. */
  static final int COMBINE_THREADS = 128;

  /**
   * out (n, nHeads, d) bf16 = the merge of the splits' partials partO (n, nHeads, splits, d) f32 and partMl
   * (n, nHeads, splits, 2) f32 (max, sum) that the split kernels wrote (attn_combine).
   */
  void combine(CUdeviceptr out, CUdeviceptr partO, CUdeviceptr partMl, int n, int nHeads, int splits, int d) {
    if (d % 4 != 0) throw new IllegalArgumentException("the split merge takes head dims that are multiples of 4, not " + d);
    l.launch("attn_combine", (nHeads * (d / 4) + COMBINE_THREADS - 1) / COMBINE_THREADS, n, 1, COMBINE_THREADS, 0, out,
        partO, partMl, nHeads, splits, d);
  }

  /** Splits for flash decoding: about four blocks per multiprocessor (one is resident at a time). */
  public static SplitPlan decodePlan(int rows, int keys, int nKv, int sms) {
    int target = Math.max(1, (4 * sms + nKv * rows - 1) / (nKv * rows));
    int chunk = (int) Math.max(64, ((long) (keys + target - 1) / target + 63) / 64 * 64);
    return new SplitPlan(chunk, (keys + chunk - 1) / chunk);
  }

  public void flashPrefill(CUdeviceptr out, CUdeviceptr q, KvView kv, int n, int nHeads, int before, int window,
                           float scale) {
    int d = kv.headDim();
    if ((d != 64 && d != 128) || kv.pageSize() != PAGE_SIZE) {
      throw new IllegalArgumentException("flash prefill takes headDim 64/128 and page size 64, not " + d + "/" + kv.pageSize());
    }
    int g = nHeads / kv.nKv();
    if (hopper && Hopper.packs(g)) {
      CUdeviceptr mq = queryMap(q, d, nHeads, n, g), mk = cacheMap(kv.kRope(), d), mv = cacheMap(kv.v(), d);
      int posPerBlock = Hopper.ATTN_ROWS / g;
      l.launch(d == 64 ? "attn_prefill_sm90_d64" : "attn_prefill_sm90_d128", (n + posPerBlock - 1) / posPerBlock,
          kv.nKv(), 1, Hopper.THREADS, Hopper.attnSmem(d), mq, mk, mv, out, kv.pageTable(), n, nHeads, kv.nKv(),
          Integer.numberOfTrailingZeros(g), before, window, scale);
      return;
    }
    int smem = (64 + 4 * 64) * (d + 8) * 2;
    l.launch(d == 64 ? "flash_prefill_d64" : "flash_prefill_d128", (n + 63) / 64, nHeads, 1, 128, smem, out, q, kv.kRope(),
        kv.v(), kv.pageTable(), n, nHeads, kv.nKv(), before, window, scale);
  }

  /**
   * A tensor map over one layer's K or V pages (page, nKv, 64, d) as rows of d: boxes of one page's
   * 64 rows by 64 dims. The row count is an upper bound (the kernels read only pages the page
   * table names); the map is the same for every call on the layer, so it is cached.
   */
  CUdeviceptr cacheMap(CUdeviceptr layer, int d) {
    return maps.matrix(layer, Integer.MAX_VALUE, d, 2L * d, PAGE_SIZE);
  }

  /**
   * A tensor map over queries q (rows, nHeads, d) in boxes of the g heads that share a KV head by
   * 128 / g positions (GQA packing: one attention tile of 128 rows).
   */
  CUdeviceptr queryMap(CUdeviceptr q, int d, int nHeads, int rows, int g) {
    return maps.tensor3(q, d, nHeads, rows, 2L * d, 2L * nHeads * d, g, Hopper.ATTN_ROWS / g);
  }

  /** Flash decoding: split the key range over blocks, then merge (any row count); adds kv's logit bias if any. */
  public void splitAttention(CUdeviceptr out, CUdeviceptr q, KvView kv, int n, int nHeads, int before, int window,
                             float scale, Workspace ws) {
    int d = kv.headDim(), g = nHeads / kv.nKv();
    if (Integer.bitCount(d) != 1 || d < 8 || d > 256) throw new IllegalArgumentException("headDim " + d + " must be a power of two in [8, 256]");
    if (g > 8) throw new IllegalArgumentException("at most 8 query heads per KV head, not " + g);
    if (Integer.bitCount(kv.pageSize()) != 1 || kv.pageSize() < 64) {
      throw new IllegalArgumentException("page size " + kv.pageSize() + " must be a power of two >= 64");
    }
    SplitPlan p = splitPlan(n, before + n, g, kv.nKv(), smCount);
    long partO = (long) n * nHeads * p.splits() * d, partMl = (long) n * nHeads * p.splits() * 2;
    DeviceBuffer w = ws.ensure((partO + partMl) * 4);
    CUdeviceptr o = w.ptr(), ml = w.at(partO * 4);
    int smem = (g * p.chunk() + SPLIT_THREADS * 8) * 4;
    l.launch(g <= 4 ? "attn_split_g4" : "attn_split_g8", kv.nKv(), p.splits(), n, SPLIT_THREADS, smem, o, ml, q, kv.kRope(), kv.v(), kv.pageTable(),
        nHeads, kv.nKv(), d, kv.pageSize(), before, window, p.chunk(), scale, kv.bias());
    combine(out, o, ml, n, nHeads, p.splits(), d);
  }

  /**
   * Attention of a batched decode step (decode_row.cuh): out (n, nHeads, d) bf16 = row b's query q (n,
   * nHeads, d) bf16 over layer {@code layer} of the cache its record in {@code rows} (n DecodeRow) names,
   * up to and including its slot. Everything that changes per step is in {@code rows}, so the launch
   * can be captured in a CUDA graph and replayed. The kernel family is the one {@link #attention}
   * takes for one row; {@code splits} comes from {@link #rowSplits} and each row's chunk from
   * {@link #rowChunk}, so each row gets the bits it gets alone. No logit bias (KV compression).
   */
  public void attentionRows(CUdeviceptr out, CUdeviceptr q, CUdeviceptr rows, int n, int layer, int nHeads, int nKv,
                            int d, int window, float scale, int splits, Workspace ws) {
    long partO = (long) n * nHeads * splits * d, partMl = (long) n * nHeads * splits * 2;
    DeviceBuffer w = ws.ensure((partO + partMl) * 4);
    CUdeviceptr o = w.ptr(), ml = w.at(partO * 4);
    int g = nHeads / nKv;
    if (flashDecodes(d, g)) {
      l.launch(d == 64 ? "flash_decode_rows_d64" : "flash_decode_rows_d128", nKv, splits, n, 128,
          (16 + 4 * 2 * 2 * 32) * (d + 8) * 2, o, ml, q, rows, layer, nHeads, nKv, window, scale);
    } else {
      int smem = (g * splitChunkMax(g) + SPLIT_THREADS * 8) * 4;
      l.launch(g <= 4 ? "attn_split_rows_g4" : "attn_split_rows_g8", nKv, splits, n, SPLIT_THREADS, smem, o, ml, q, rows,
          layer, nHeads, nKv, d, PAGE_SIZE, window, scale);
    }
    combine(out, o, ml, n, nHeads, splits, d);
  }

  /** A batched decode step's KV append: row b of qkv (rows of stride f32) into the cache rows[b] names. */
  public void kvAppendRows(CUdeviceptr rows, int n, int layer, CUdeviceptr qkv, int stride, int kOff, int vOff, int nKv,
                           int headDim, CUdeviceptr invFreq) {
    l.launch("kv_append_rows", n, (nKv * headDim / 2 + 255) / 256, 1, 256, 0, rows, layer, qkv, stride, kOff, vOff, nKv,
        headDim, PAGE_SIZE, invFreq);
  }

  /** Whether one decode row takes flash decoding on tensor cores (else the CUDA-core split kernel), as in {@link #attention}. */
  static boolean flashDecodes(int headDim, int group) {
    return (headDim == 64 || headDim == 128) && group <= 16;
  }

  /** Keys per split of one decode row with {@code keys} keys: the chunk {@link #attention} plans for it alone. */
  public int rowChunk(int keys, int nHeads, int nKv, int headDim) {
    int g = nHeads / nKv;
    return flashDecodes(headDim, g) ? decodePlan(1, keys, nKv, smCount).chunk() : splitPlan(1, keys, g, nKv, smCount).chunk();
  }

  /** The grid's split count for decode rows of at most maxKeys keys: the most splits any such row plans alone. */
  public int rowSplits(int maxKeys, int nHeads, int nKv, int headDim) {
    int g = nHeads / nKv;
    if (flashDecodes(headDim, g)) return Math.max(1, (4 * smCount + nKv - 1) / nKv);  // decodePlan's target
    int target = Math.max(1, (2 * smCount + nKv - 1) / nKv);                          // splitPlan's
    return Math.max(target, (maxKeys + splitChunkMax(g) - 1) / splitChunkMax(g));
  }

  private static int splitChunkMax(int group) {
    return Math.max(64, Math.min(2048, (40 * 1024 / (4 * group)) / 64 * 64));
  }

  /**
   * The picks of a batched decode step: tokens (n) int from logits (n, vocab) f32, row b with (1 /
   * temperature, top-p, uniform) from params (n, 3) f32 on the device, 1 / temperature 0 for greedy;
   * the same pick as {@link #argmax} or {@link #sampleTopP} with those values. probs (n, vocab) f32 scratch.
   * Row b is held to its token mask, masks + b * maskWords u32, where masked[b] (int, on the device) is not 0.
   */
  public void sampleRows(CUdeviceptr tokens, CUdeviceptr probs, CUdeviceptr logits, CUdeviceptr params, int n, int vocab,
                         CUdeviceptr masks, CUdeviceptr masked, int maskWords) {
    l.launch("sample_rows", n, 1, 1, 1024, 0, tokens, probs, logits, params, vocab, masks, masked, maskWords);
  }

  /** u32 words of a token mask over vocab ids: whole 64-bit words of the host's long[] bitset, little-endian. */
  public static int maskWords(int vocab) {
    return 2 * ((vocab + 63) / 64);
  }

  /** {@link #argmax} over the tokens whose bit is set in mask (maskWords(vocab)) u32 on the device. */
  public void argmaxMasked(CUdeviceptr token, CUdeviceptr logits, int vocab, CUdeviceptr mask) {
    l.launch("argmax_masked_f32", 1, 1, 1, 1024, 0, token, logits, vocab, mask);
  }

  /** {@link #sampleTopP} over the tokens whose bit is set in mask; a token of probability 0 is never drawn. */
  public void sampleTopPMasked(CUdeviceptr token, CUdeviceptr probs, CUdeviceptr logits, int vocab, float temperature,
                               float topP, float u, CUdeviceptr mask) {
    l.launch("sample_top_p_masked", 1, 1, 1, 1024, 0, token, probs, logits, vocab, 1f / temperature, topP, u, mask);
  }

  /** Keys per split and split count: about two blocks per multiprocessor, at most 40 KB of scores. */
  public record SplitPlan(int chunk, int splits) {}

  public static SplitPlan splitPlan(int rows, int keys, int group, int nKv, int sms) {
    int chunkMax = splitChunkMax(group);
    int target = Math.max(1, (2 * sms + nKv * rows - 1) / (nKv * rows));
    int chunk = (int) Math.min(chunkMax, Math.max(64, ((long) (keys + target - 1) / target + 63) / 64 * 64));
    return new SplitPlan(chunk, (keys + chunk - 1) / chunk);
  }

  /** token (1) int = argmax of logits (vocab) f32, lowest id on ties. */
  public void argmax(CUdeviceptr token, CUdeviceptr logits, int vocab) {
    l.launch("argmax_f32", 1, 1, 1, 1024, 0, token, logits, vocab);
  }

  /** token (1) int = top-p sample of softmax(logits / temperature) at uniform u; probs (vocab) f32 scratch. */
  public void sampleTopP(CUdeviceptr token, CUdeviceptr probs, CUdeviceptr logits, int vocab, float temperature,
                         float topP, float u) {
    l.launch("sample_top_p", 1, 1, 1, 1024, 0, token, probs, logits, vocab, 1f / temperature, topP, u);
  }

  /** n bf16 uniform in [-scale, scale) from a seeded counter hash. */
  public void fillRandomBf16(CUdeviceptr p, long n, long seed, float scale) {
    l.launch("fill_random_bf16", (int) Math.min(65535, (n + 255) / 256), 1, 1, 256, 0, p, n, seed, scale);
  }


  public void fillF32(CUdeviceptr p, long n, float value) {
    l.launch("fill_f32", (int) Math.min(65535, (n + 255) / 256), 1, 1, 256, 0, p, n, value);
  }

  public void bf16ToF32(CUdeviceptr out, CUdeviceptr in, long n) {
    l.launch("bf16_to_f32", (int) Math.min(65535, (n + 255) / 256), 1, 1, 256, 0, out, in, n);
  }

  /**
   * One layer's view of the paged cache: kPre, kRope and v each (pages, nKv, pageSize, headDim)
   * bf16, pageTable (pages) int mapping logical to physical pages, bias (slots, nHeads) f32 additive
   * logit bias per slot and QUERY head (SelKV's compensation), null while no policy set one; the
   * kernels index it with their own nHeads argument.
   */
  public record KvView(CUdeviceptr kPre, CUdeviceptr kRope, CUdeviceptr v, CUdeviceptr pageTable, int nKv, int headDim,
                       int pageSize, CUdeviceptr bias) {
    public KvView(CUdeviceptr kPre, CUdeviceptr kRope, CUdeviceptr v, CUdeviceptr pageTable, int nKv, int headDim,
                  int pageSize) {
      this(kPre, kRope, v, pageTable, nKv, headDim, pageSize, null);
    }
  }

  /** Scratch device memory that grows on demand (growth allocates, so it happens outside steady state). */
  public static final class Workspace implements AutoCloseable {
    private final CudaContext ctx;
    private DeviceBuffer buf;
    private int generation;  // counts reallocations: a captured CUDA graph holds the old pointer

    public Workspace(CudaContext ctx) {
      this.ctx = ctx;
    }

    public DeviceBuffer ensure(long bytes) {
      if (buf == null || buf.bytes() < bytes) {
        if (buf != null) {
          ctx.synchronize();
          buf.close();
        }
        buf = ctx.alloc(Math.max(bytes, 1 << 20), "attention workspace");
        generation++;
      }
      return buf;
    }

    /** Changes whenever {@link #ensure} reallocates. */
    public int generation() {
      return generation;
    }

    @Override
    public void close() {
      if (buf != null) buf.close();
      buf = null;
    }
  }
}
