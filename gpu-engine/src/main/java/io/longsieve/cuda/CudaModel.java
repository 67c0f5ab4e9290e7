package io.longsieve.cuda;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Fp8Kernels;
import io.longsieve.cuda.kernels.FamilyKernels;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.WeightMatrix;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.policy.GpuEnv;
import io.longsieve.cuda.policy.GpuPolicy;
import io.longsieve.cuda.policy.LayerCall;
import io.longsieve.model.ModelConfig;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/**
 * The forward pass of a decoder on the GPU, the same steps in the same order as cpu/CpuModel: embed
 * (× the family's scale), then per layer RMSNorm → q/k/v (one GEMM; → per-head q/k RMSNorm) → KV
 * append (keys before RoPE) → attention with the layer's RoPE table and window → output projection
 * added to the residual (normed first where the family norms it) → RMSNorm → gate/up (one GEMM) →
 * SwiGLU or GeGLU → down projection added to the residual (normed first likewise); then the final
 * norm, the LM head for the last position (→ soft-capping) and, for decode, the next token picked on
 * the device. The families' steps are FamilyKernels; q and k are in the layout of {@link QkLayout}. Residual stream f32, matmul inputs bf16,
 * f32 accumulation. Everything is queued on one stream: a decode step runs without a host
 * synchronisation until its token id is read back.
 *
 * <p>Failure semantics: CUDA errors surface as {@link jcuda.CudaException} from the call that
 * queued or synchronised the failing work; after one the context may be unusable and the engine
 * should be closed. Not thread-safe: one sequence runs at a time.
 */
public final class CudaModel implements AutoCloseable {

  private final ModelConfig c;
  private final CudaContext ctx;
  private final Kernels k;
  private final FamilyKernels fk;
  private final CudaWeights w;
  private final int maxChunk;
  private final float scale;
  private final List<DeviceBuffer> acts = new ArrayList<>();
  private final Kernels.Workspace ws;
  private Profile profile;

  private final DeviceBuffer x;       // (chunk, dim) f32 residual stream
  private final DeviceBuffer xb;      // (chunk, dim) bf16 normed input of a sub-block
  private final DeviceBuffer qkv;     // (chunk, qDim + 2 kvDim) f32 projections (+ bias), keys before RoPE
  private final DeviceBuffer q;       // (chunk, nHeads, headDim) bf16 rotated queries
  private final DeviceBuffer att;     // (chunk, nHeads, headDim) bf16 attention output
  private final DeviceBuffer gu;      // (chunk, 2 hidden) bf16 [gate | up]; 8 rows where the GEMM fuses SwiGLU
  private final DeviceBuffer hb;      // (chunk, hidden) bf16 silu(gate) * up
  private final Fp8Kernels fp8;       // FP8 weights' products and activation scratch; null without FP8 weights
  private final DeviceBuffer last;    // (dim) bf16 final-normed last row
  private final DeviceBuffer logits;  // (vocab) f32
  private final DeviceBuffer probs;   // (vocab) f32 sampling scratch
  private final DeviceBuffer tokens;  // (chunk) int input ids; tokens[0] is also the sampled id
  private final DeviceBuffer sub;     // (chunk, dim) f32 a sub-block's output before its norm joins x; null unless sandwich norms
  private final RopeTables rope;      // each layer's (headDim / 2) f32 RoPE table, from model/Rope
  private final DeviceBuffer batchLogits; // (MAX_DECODE_BATCH, vocab) f32 logits of a batched decode step
  private final DeviceBuffer batchPos;    // (MAX_DECODE_BATCH) int positions of a batched decode step's rows
  private final DeviceBuffer batchProbs;  // (MAX_DECODE_BATCH, vocab) f32 sampling scratch of a dense step's rows
  private final DecodeStep step;          // the dense decode step's plan on the device, and its CUDA graphs
  private final DeviceBuffer maskRows;    // (MAX_DECODE_BATCH, maskWords) u32 token masks of the eager picks' rows
  private boolean decodeGraphs = !"false".equals(System.getProperty("longsieve.decodeGraphs"));
  private final int[] batchHost = new int[MAX_DECODE_BATCH];
  private final int[] batchPosHost = new int[MAX_DECODE_BATCH];
  private final int[] tokenHost = new int[1];

  public CudaModel(ModelConfig c, CudaContext ctx, Kernels k, CudaWeights w, int maxChunk) {
    this.c = c;
    this.ctx = ctx;
    this.k = k;
    this.fk = new FamilyKernels(k);
    this.w = w;
    this.maxChunk = maxChunk;
    this.scale = (float) c.traits().queryScale();
    this.ws = new Kernels.Workspace(ctx);
    Fp8Kernels f8 = null;
    RopeTables tables = null;
    try {
      long n = maxChunk, dim = c.hiddenSize(), h = c.intermediateSize();
      x = act(n * dim * 4, "residual");
      xb = act(n * dim * 2, "normed");
      qkv = act(n * (c.qDim() + 2L * c.kvDim()) * 4, "qkv");
      q = act(n * c.qDim() * 2, "queries");
      att = act(n * c.qDim() * 2, "attention out");
      gu = act((w.gateUpUnfused() || c.traits().geglu() ? n : k.swigluScratchRows(n, (int) h)) * 2 * h * 2, "gate/up");  // GeGLU and FP8 blocks: never fused
      hb = act(n * h * 2, "swiglu");
      last = act(dim * 2, "last row");
      logits = act(c.vocabSize() * 4L, "logits");
      probs = act(c.vocabSize() * 4L, "probs");
      tokens = act(Math.max(n, 1) * 4, "tokens");
      sub = c.traits().sandwichNorms() ? act(n * dim * 4, "sub-block output") : null;
      batchLogits = act((long) MAX_DECODE_BATCH * c.vocabSize() * 4, "batch logits");
      batchPos = act(MAX_DECODE_BATCH * 4L, "batch positions");
      batchProbs = act((long) MAX_DECODE_BATCH * c.vocabSize() * 4, "batch probs");
      tables = new RopeTables(c, ctx);
      step = new DecodeStep(ctx, c.vocabSize());
      maskRows = act((long) MAX_DECODE_BATCH * Kernels.maskWords(c.vocabSize()) * 4, "token masks");
      if (w.hasFp8()) f8 = new Fp8Kernels(k, ctx, n, w.maxFp8Inputs(c));  // FP8 weights' activation scratch
    } catch (RuntimeException e) {
      if (tables != null) tables.close();
      close();
      throw e;
    }
    rope = tables;
    this.fp8 = f8;
  }

  /** out (m, n) (mode) = a (m, kk) bf16 . wm (n, kk)^T (+ bias): bf16 weights through Kernels, FP8 ones through Fp8Kernels. */
  private void linear(CUdeviceptr out, int mode, CUdeviceptr a, WeightMatrix wm, CUdeviceptr bias, int m, int n, int kk) {
    if (wm.fp8() == null) k.matmul(out, mode, a, wm.bf16().ptr(), bias, m, n, kk);
    else fp8.matmul(out, mode, a, wm.fp8(), bias, m, n, kk);
  }

  /** hb (m, hidden) bf16 = silu(gate) * up of xb (m, dim) . wgu^T, through gu where it does not fuse. */
  private void gateUpSwiglu(WeightMatrix wgu, int m) {
    int hidden = c.intermediateSize(), dim = c.hiddenSize();
    if (wgu.fp8() == null) k.gateUpSwiglu(hb.ptr(), gu.ptr(), xb.ptr(), wgu.bf16().ptr(), m, hidden, dim);
    else fp8.gateUpSwiglu(hb.ptr(), gu.ptr(), xb.ptr(), wgu.fp8(), m, hidden, dim);
  }

  private DeviceBuffer act(long bytes, String what) {
    DeviceBuffer b = ctx.alloc(bytes, what);
    acts.add(b);
    return b;
  }

  public ModelConfig config() {
    return c;
  }

  public Kernels kernels() {
    return k;
  }

  public int maxChunk() {
    return maxChunk;
  }

  /** Device bytes of activations for a chunk size (memory planning). */
  public static long activationBytes(ModelConfig c, int chunk) {
    long n = chunk, dim = c.hiddenSize(), h = c.intermediateSize();
    return n * dim * (c.traits().sandwichNorms() ? 10 : 6) + n * (c.qDim() + 2L * c.kvDim()) * 4 + n * c.qDim() * 4
        + n * h * 6 + 8L * c.vocabSize()
        + n * 4 + dim * 2 + 4L * MAX_DECODE_BATCH * (2L * c.vocabSize() + 1) + 1024
        + 2L * MAX_DECODE_BATCH * Kernels.maskWords(c.vocabSize()) * 4; // token masks: the eager picks' and the step's
  }

  /** Starts timing GEMMs and attention with events (benchmarks); null stops. */
  public void profile(Profile p) {
    this.profile = p;
  }

  /** The environment GPU attention policies are built with. */
  public GpuEnv env(java.nio.file.Path modelDir) {
    return new GpuEnv(c, ctx, k, ws, rope.full(), modelDir);
  }

  /** Sizes the attention workspace for decoding up to {@code capacity} tokens, so steps never allocate. */
  public void reserveDecode(int capacity) {
    Kernels.SplitPlan p = Kernels.splitPlan(1, capacity, c.group(), c.numKvHeads(), ctx.smCount());
    Kernels.SplitPlan f = Kernels.decodePlan(1, capacity, c.numKvHeads(), ctx.smCount());
    long splits = Math.max(p.splits(), f.splits()) + 2;
    long rows = (long) MAX_DECODE_BATCH * k.rowSplits(capacity, c.numHeads(), c.numKvHeads(), c.headDim());
    ws.ensure((long) c.numHeads() * Math.max(splits, rows) * (c.headDim() + 2) * 4);
  }

  /**
   * Whether {@link #decodeDense} runs the step from CUDA graphs (the default; the eager launches of
   * the same kernels otherwise). {@code -Dlongsieve.decodeGraphs=false} starts with it off.
   */
  public void useDecodeGraphs(boolean on) {
    this.decodeGraphs = on;
  }

  /** Whether decode steps run from CUDA graphs ({@link #useDecodeGraphs}). */
  public boolean decodeGraphs() {
    return decodeGraphs;
  }

  /** Decode steps that ran from a captured graph so far (tests, benchmarks). */
  public long graphReplays() {
    return step.replays();
  }

  /**
   * Whether a sequence's cache can take {@link #decodeDense} steps: dense attention over the whole
   * cache, every layer the same length, no logit bias (KV compression's merges).
   */
  public static boolean denseDecodable(PagedKvCache kv) {
    return !kv.hasBias() && kv.uniformLength();
  }

  /**
   * One dense decode step for n sequences (1 to {@link #MAX_DECODE_BATCH}): sequence b runs ids[b]
   * at positions[b] on kvs[b] (appended at its length) and picks greedily where invTemp[b] is 0,
   * else top-p at topP[b] with the uniform u[b]; returns the picks in next. The step's plan goes to
   * the device in one copy and the step runs from a CUDA graph (see {@link DecodeStep}), so the
   * host's cost does not grow with the layers. Each sequence gets the bits {@link #decode} and
   * {@link #decodeBatch} give it: the same kernels' arithmetic on its row, whatever the batch.
   * Every cache must be {@link #denseDecodable}.
   */
  public void decodeDense(int[] ids, int[] positions, PagedKvCache[] kvs, float[] invTemp, float[] topP, float[] u,
                          int n, int[] next) {
    decodeStep(ids, positions, kvs, null, invTemp, topP, u, n, next);
  }

  /**
   * As {@link #decodeDense}, row b attending through policies[b] where it is non-null and does not
   * decode densely: then it must {@link GpuPolicy#capturesDecode} (TokenSelect), which plans the
   * step on the host and launches its selection inside the step, reading the moving sizes from the
   * step's plan (so these steps replay from graphs too). Each sequence gets the bits
   * {@link #decodeBatch} gives it through {@link GpuPolicy#decode}; the policy counts its
   * statistics, dense rows are counted by the caller. policies null: every row dense.
   */
  public void decodeStep(int[] ids, int[] positions, PagedKvCache[] kvs, GpuPolicy[] policies, float[] invTemp,
                         float[] topP, float[] u, int n, int[] next) {
    decodeStep(ids, positions, kvs, policies, invTemp, topP, u, null, n, next);
  }

  /**
   * As above, row b's pick held to masks[b] where it is non-null (a JSON-schema request's allowed tokens,
   * {@link io.longsieve.engine.spi.Sampler#allowed}): the masks go to the device with the step's plan and
   * the sampling kernel applies them where the logits are. masks null: no row masked.
   */
  public void decodeStep(int[] ids, int[] positions, PagedKvCache[] kvs, GpuPolicy[] policies, float[] invTemp,
                         float[] topP, float[] u, long[][] masks, int n, int[] next) {
    if (n < 1 || n > MAX_DECODE_BATCH) throw new IllegalArgumentException("batch of " + n + " outside [1, 8]");
    oneTableFor(positions, n);
    try {
      int heads = c.numHeads(), nKv = c.numKvHeads(), d = c.headDim(), maxKeys = 0;
      boolean anyPolicy = false;
      for (int b = 0; b < n; b++) {
        PagedKvCache kv = kvs[b];
        if (!denseDecodable(kv)) throw new IllegalArgumentException("sequence " + b + "'s cache is compressed");
        GpuPolicy p = policies == null || policies[b] == null || policies[b].decodesDense() ? null : policies[b];
        if (p != null && !p.capturesDecode()) {
          throw new IllegalArgumentException("sequence " + b + "'s policy " + p.describe() + " does not run in a step");
        }
        stepPolicies[b] = p;
        anyPolicy |= p != null;
        kv.reserve(1);
        int slot = kv.length(0);
        maxKeys = Math.max(maxKeys, slot + 1);
        step.row(b, ids[b], positions[b], kv, slot, k.rowChunk(slot + 1, heads, nKv, d), invTemp[b], topP[b], u[b]);
        step.mask(b, masks == null ? null : masks[b]);
      }
      int splits = k.rowSplits(maxKeys, heads, nKv, d);
      step.keyStart(n, splits);
      for (int b = 0; b < n; b++) {
        GpuPolicy p = stepPolicies[b];
        if (p == null) continue;
        int slot = kvs[b].length(0);
        step.keyRow(b, p.id(), p.planStep(kvs[b], slot + 1, positions[b], stepSizes, 0));
        step.sizes(b, stepSizes, 0);
      }
      ws.ensure((long) n * heads * splits * (d + 2) * 4);  // before any capture: a graph must never reallocate
      step.upload(k.stream());
      stepN = n;
      stepSplits = splits;
      stepMixed = anyPolicy;
      System.arraycopy(positions, 0, stepPos, 0, n);
      for (int b = 0; b < n; b++) stepKvs[b] = kvs[b];
      if (decodeGraphs) step.run(k.stream(), ws.generation(), stepWork);
      else stepWork.run();
      step.read(k.stream(), n, next);
      for (int b = 0; b < n; b++) {
        for (int l = 0; l < c.numLayers(); l++) kvs[b].advance(l, 1);
      }
    } finally {
      Arrays.fill(stepKvs, null);  // the step's sequences are not kept beyond it
      Arrays.fill(stepPolicies, null);
    }
  }

  // the step decodeStep queues, as fields: its work is one Runnable made once (no allocation per step)
  private final GpuPolicy[] stepPolicies = new GpuPolicy[MAX_DECODE_BATCH];
  private final PagedKvCache[] stepKvs = new PagedKvCache[MAX_DECODE_BATCH];
  private final int[] stepPos = new int[MAX_DECODE_BATCH];
  private final int[] stepSizes = new int[DecodeStep.SIZE_INTS];
  private int stepN, stepSplits;
  private boolean stepMixed;
  private final Runnable stepWork = () -> stepKernels(stepN, stepSplits);

  /**
   * The kernels of a decode step for n rows, reading the step's plan from the device: the same
   * order as {@link #layers}, every per-sequence value (token, position, cache, slot, chunk,
   * sampling, a policy row's moving sizes) in {@link #step}'s buffer, so the launches can be
   * captured and replayed.
   */
  private void stepKernels(int n, int splits) {
    int dim = c.hiddenSize(), hidden = c.intermediateSize(), qDim = c.qDim(), kvDim = c.kvDim();
    int stride = qDim + 2 * kvDim;
    embed(step.tokens(), n);
    for (int l = 0; l < c.numLayers(); l++) {
      CudaWeights.Layer lw = w.layers[l];
      queriesKeysValues(lw, n);                                                  // (n, qDim + 2 kvDim)
      k.rope(q.ptr(), qkv.ptr(), stride, n, c.numHeads(), c.headDim(), rope.layer(l), step.positions(), 0);
      k.kvAppendRows(step.rows(), n, l, qkv.ptr(), stride, qDim, qDim + kvDim, c.numKvHeads(), c.headDim(),
          rope.layer(l));                                                        // keys before RoPE
      if (!stepMixed) {
        k.attentionRows(att.ptr(), q.ptr(), step.rows(), n, l, c.numHeads(), c.numKvHeads(), c.headDim(),
            c.window(l), scale, splits, ws);                                     // (n, qDim)
      } else {
        mixedAttention(n, l, splits, stride);
      }
      outputAndFeedForward(lw, n);
    }
    k.rmsNorm(xb.ptr(), x.ptr(), w.finalNorm.ptr(), n, dim, c.rmsNormEps());             // (n, dim)
    linear(batchLogits.ptr(), Kernels.OUT_F32, xb.ptr(), w.lmHead, null, n, c.vocabSize(), dim); // (n, vocab)
    softcap(batchLogits.ptr(), n);
    k.sampleRows(step.tokens(), batchProbs.ptr(), batchLogits.ptr(), step.sampling(), n, c.vocabSize(), step.masks(),
        step.masked(), step.maskWords());
  }

  /** Layer l's attention in a step with policy rows: selecting rows on branches of their own (StepBranches). */
  private void mixedAttention(int n, int l, int splits, int stride) {
    if (n == 1) {
      rowAttention(0, l, splits, stride);
      return;
    }
    for (int b = 0; b < n; b++) branched[b] = stepPolicies[b] != null && !stepPolicies[b].stepAttendsDense(l);
    if (branches == null) branches = new StepBranches(ctx, k, MAX_DECODE_BATCH);
    branches.run(n, branched, b -> rowAttention(b, l, splits, stride));
  }

  private StepBranches branches;  // made on the first step with several policy rows (outside any capture)
  private final boolean[] branched = new boolean[MAX_DECODE_BATCH];

  /**
   * Row b's attention in layer l of a step with policy rows: dense through its DecodeRow (a dense
   * row, or a policy row whose plan attends densely in this layer), else its policy's launches.
   */
  private void rowAttention(int b, int l, int splits, int stride) {
    int qDim = c.qDim();
    CUdeviceptr qRow = q.at((long) b * qDim * 2), attRow = att.at((long) b * qDim * 2);
    GpuPolicy p = stepPolicies[b];
    if (p == null || p.stepAttendsDense(l)) {
      k.attentionRows(attRow, qRow, step.row(b), 1, l, c.numHeads(), c.numKvHeads(), c.headDim(), c.window(l),
          scale, splits, ws);
      return;
    }
    PagedKvCache kv = stepKvs[b];
    p.launchStep(new LayerCall(l, 1, stepPos[b], kv.length(l), qkv.at((long) b * stride * 4), stride, qRow,
        kv.layer(l), attRow), step.sizes(b));
  }

  /** Row b's logits (vocab) of the last {@link #decodeDense} or {@link #decodeBatch} step (tests; synchronises). */
  public float[] batchLogits(int b) {
    float[] out = new float[c.vocabSize()];
    k.stream().copyToHost(Pointer.to(out), batchLogits, (long) b * c.vocabSize() * 4, c.vocabSize() * 4L);
    k.stream().synchronize();
    return out;
  }

  /**
   * Runs tokens through the model at positions pos0.., appending to the cache, in chunks of at
   * most maxChunk; leaves the logits of the last token on the device.
   */
  public void prefill(int[] ids, int pos0, PagedKvCache kv, GpuPolicy policy) {
    prefill(ids, pos0, kv, policy, maxChunk);
  }

  /**
   * As {@link #prefill(int[], int, PagedKvCache, GpuPolicy)} in chunks of exactly {@code chunk}
   * tokens (the last one shorter): a chunk the request's policy fixes (TSA selects once per chunk,
   * PolicySpec.prefillChunk). The activations hold maxChunk rows, sized at start.
   *
   * @throws IllegalArgumentException for a chunk outside [1, maxChunk], before any work
   */
  public void prefill(int[] ids, int pos0, PagedKvCache kv, GpuPolicy policy, int chunk) {
    prefill(ids, pos0, kv, policy, chunk, pos0 + ids.length);
  }

  /**
   * As {@link #prefill(int[], int, PagedKvCache, GpuPolicy, int)} for a part of a prompt of
   * {@code promptLength} tokens (prefix reuse): the RoPE table is that of the whole prompt's call,
   * as when the prompt runs in one call.
   */
  public void prefill(int[] ids, int pos0, PagedKvCache kv, GpuPolicy policy, int chunk, int promptLength) {
    if (chunk < 1 || chunk > maxChunk) {
      throw new IllegalArgumentException("a prefill chunk of " + chunk + " tokens; this engine's activations hold "
          + maxChunk + " (--prefill-chunk)");
    }
    rope.useLength(promptLength, k.stream());  // one call over the prompt: its whole length's table
    for (int s = 0; s < ids.length; s += chunk) {
      int n = Math.min(chunk, ids.length - s);
      k.stream().copyToDevice(tokens, 0, Pointer.to(ids).withByteOffset(s * 4L), n * 4L);
      layers(n, pos0 + s, kv, policy, false);
      // the copy above reads host memory asynchronously: wait before the next chunk reuses it
      k.stream().synchronize();
    }
    head((ids.length - 1) % chunk + 1);
  }

  /** One token at position pos whose id is already on the device (the last sampled one) or given. */
  public void decode(int token, boolean tokenOnDevice, int pos, PagedKvCache kv, GpuPolicy policy) {
    rope.useLength(pos + 1, k.stream());
    if (!tokenOnDevice) {
      tokenHost[0] = token;
      k.stream().copyToDevice(tokens, 0, Pointer.to(tokenHost), 4);
    }
    layers(1, pos, kv, policy, true);
    head(1);
  }

  /**
   * Rows [row0, row0 + n) of a forward pass that belong to one sequence: its cache, its policy
   * (dense when null) and the position of its first row. A prefill chunk is one such run of rows;
   * a batched decode step is one row per sequence.
   */
  private record Rows(PagedKvCache kv, GpuPolicy policy, int row0, int n, int pos0) {}

  /** The layers for one sequence's n rows at positions pos0... */
  private void layers(int n, int pos0, PagedKvCache kv, GpuPolicy policy, boolean decoding) {
    layers(new Rows[] {new Rows(kv, policy, 0, n, pos0)}, n, decoding, null);
  }

  /**
   * The layers for total rows made of runs of several sequences: the weight matmuls take all rows
   * at once (one pass over each weight matrix), KV append and attention go run by run, RoPE too
   * unless rowPositions (total) int on the device gives every row's position (one launch for all).
   * Every kernel treats rows independently, and the GEMV (up to 8 rows) accumulates each row in the
   * same order whatever the row count, so a sequence's results do not depend on its batch.
   */
  private void layers(Rows[] runs, int total, boolean decoding, CUdeviceptr rowPositions) {
    int dim = c.hiddenSize(), hidden = c.intermediateSize(), qDim = c.qDim(), kvDim = c.kvDim();
    int stride = qDim + 2 * kvDim;
    for (Rows r : runs) r.kv().reserve(r.n());  // pages for the rows appended below (a shared KV page pool)
    embed(tokens.ptr(), total);
    for (int l = 0; l < c.numLayers(); l++) {
      CudaWeights.Layer lw = w.layers[l];
      CUdeviceptr table = rope.layer(l);                                        // the layer's RoPE
      // attention block
      queriesKeysValues(lw, total);                                             // (total, qDim + 2 kvDim)
      if (rowPositions != null) {
        k.rope(q.ptr(), qkv.ptr(), stride, total, c.numHeads(), c.headDim(), table, rowPositions, 0);
      }
      for (Rows r : runs) {
        Kernels.KvView view = r.kv().layer(l);
        int before = r.kv().length(l), n = r.n(), pos0 = r.pos0();
        CUdeviceptr qkvRows = qkv.at((long) r.row0() * stride * 4), qRows = q.at((long) r.row0() * qDim * 2);
        CUdeviceptr attRows = att.at((long) r.row0() * qDim * 2);
        k.kvAppend(view, qkvRows, stride, qDim, qDim + kvDim, n, before, pos0, table); // keys before RoPE
        r.kv().advance(l, n);
        if (rowPositions == null) k.rope(qRows, qkvRows, stride, n, c.numHeads(), c.headDim(), table, null, pos0);
        mark(Profile.ATTENTION);
        if (r.policy() == null) {
          k.attention(attRows, qRows, view, n, c.numHeads(), before, c.window(l), scale, ws); // (n, qDim)
        } else {
          LayerCall call = new LayerCall(l, n, pos0, before, qkvRows, stride, qRows, view, attRows);
          if (decoding) r.policy().decode(call, r.kv());
          else r.policy().prefill(call);
        }
        mark(Profile.OTHER);
      }
      outputAndFeedForward(lw, total);
    }
  }

  /** x (n, dim) f32 = the embeddings of the n token ids at tokenIds, times the family's scale (Gemma: √dim). */
  private void embed(CUdeviceptr tokenIds, int n) {
    int dim = c.hiddenSize();
    k.embed(x.ptr(), w.embed.ptr(), tokenIds, n, dim, c.vocabSize());
    if (c.traits().embedScale() != 1) fk.scale(x.ptr(), (long) n * dim, (float) c.traits().embedScale());
  }

  /** qkv (n, qDim + 2 kvDim) f32 of the n rows of x: RMSNorm, the projection (+ bias), then (Qwen3, Gemma 3) the per-head q/k norms. */
  private void queriesKeysValues(CudaWeights.Layer lw, int n) {
    int dim = c.hiddenSize(), qDim = c.qDim(), stride = qDim + 2 * c.kvDim();
    k.rmsNorm(xb.ptr(), x.ptr(), lw.attnNorm().ptr(), n, dim, c.rmsNormEps());
    mark(Profile.GEMM);
    linear(qkv.ptr(), Kernels.OUT_F32, xb.ptr(), lw.wqkv(), lw.bqkv() == null ? null : lw.bqkv().ptr(), n,
        stride, dim);                                                           // (n, qDim + 2 kvDim)
    mark(Profile.OTHER);
    if (lw.qNorm() != null) {
      fk.qkNorm(qkv.ptr(), stride, n, c.numHeads(), c.numKvHeads(), qDim, c.headDim(), lw.qNorm().ptr(), lw.kNorm().ptr(),
          c.rmsNormEps());
    }
  }

  /**
   * x += att · woᵀ (through its norm first where the family norms the attention output), then the
   * feed-forward block: x += w_down · act(gate) * up of RMSNorm(x), act SiLU (fused into the GEMM
   * where it can be) or the tanh GELU, the MLP's output normed first likewise.
   */
  private void outputAndFeedForward(CudaWeights.Layer lw, int n) {
    int dim = c.hiddenSize(), hidden = c.intermediateSize(), qDim = c.qDim();
    mark(Profile.GEMM);
    if (lw.postAttnNorm() == null) {
      linear(x.ptr(), Kernels.OUT_F32_ADD, att.ptr(), lw.wo(), null, n, dim, qDim);        // x += att · woᵀ
    } else {
      linear(sub.ptr(), Kernels.OUT_F32, att.ptr(), lw.wo(), null, n, dim, qDim);          // (n, dim)
      fk.rmsNormAdd(x.ptr(), sub.ptr(), lw.postAttnNorm().ptr(), n, dim, c.rmsNormEps());
    }
    mark(Profile.OTHER);
    k.rmsNorm(xb.ptr(), x.ptr(), lw.ffnNorm().ptr(), n, dim, c.rmsNormEps());
    mark(Profile.GEMM);
    if (c.traits().geglu()) {
      linear(gu.ptr(), Kernels.OUT_BF16, xb.ptr(), lw.wgu(), null, n, 2 * hidden, dim);   // (n, 2 hidden)
      fk.geglu(hb.ptr(), gu.ptr(), n, hidden);                                                   // (n, hidden)
    } else {
      gateUpSwiglu(lw.wgu(), n);              // (n, hidden)
    }
    if (lw.postFfnNorm() == null) {
      linear(x.ptr(), Kernels.OUT_F32_ADD, hb.ptr(), lw.wDown(), null, n, dim, hidden);   // x += h · w_downᵀ
    } else {
      linear(sub.ptr(), Kernels.OUT_F32, hb.ptr(), lw.wDown(), null, n, dim, hidden);     // (n, dim)
      fk.rmsNormAdd(x.ptr(), sub.ptr(), lw.postFfnNorm().ptr(), n, dim, c.rmsNormEps());
    }
    mark(Profile.OTHER);
  }

  /** Gemma's final_logit_softcapping over n rows of logits (vocab f32), when the model has it. */
  private void softcap(CUdeviceptr logitRows, int n) {
    double cap = c.traits().finalLogitSoftcap();
    if (cap > 0) fk.softcap(logitRows, (long) n * c.vocabSize(), (float) cap);
  }

  /**
   * Whether a layer's RoPE table follows each call's length (dynamic NTK, LongRoPE): a decode step
   * then takes one sequence (CudaRunner steps such sequences one at a time).
   */
  public boolean ropeDependsOnLength() {
    return rope.dependsOnLength();
  }

  /** The tables for a decode step of n rows at positions: one row when they depend on length. */
  private void oneTableFor(int[] positions, int n) {
    if (!rope.dependsOnLength()) return;
    if (n != 1) throw new IllegalArgumentException("a length-dependent RoPE decodes one sequence a step, not " + n);
    rope.useLength(positions[0] + 1, k.stream());
  }

  /** Most sequences one batched decode step takes: the GEMV's row limit (larger batches would change numerics). */
  public static final int MAX_DECODE_BATCH = 8;

  /**
   * One decode step for n sequences together: sequence i runs ids[i] at positions[i] on its own
   * cache and policy; the picks go to {@link #pickBatch}. n at most {@link #MAX_DECODE_BATCH}.
   */
  public void decodeBatch(int[] ids, int[] positions, PagedKvCache[] kvs, GpuPolicy[] policies, int n) {
    if (n < 1 || n > MAX_DECODE_BATCH) throw new IllegalArgumentException("batch of " + n + " outside [1, 8]");
    oneTableFor(positions, n);
    Rows[] runs = new Rows[n];
    for (int i = 0; i < n; i++) runs[i] = new Rows(kvs[i], policies[i], i, 1, positions[i]);
    System.arraycopy(ids, 0, batchHost, 0, n);
    System.arraycopy(positions, 0, batchPosHost, 0, n);
    k.stream().copyToDevice(tokens, 0, Pointer.to(batchHost), n * 4L);
    k.stream().copyToDevice(batchPos, 0, Pointer.to(batchPosHost), n * 4L);
    layers(runs, n, true, batchPos.ptr());
    int dim = c.hiddenSize();
    k.rmsNorm(xb.ptr(), x.ptr(), w.finalNorm.ptr(), n, dim, c.rmsNormEps());           // (n, dim) final-normed rows
    linear(batchLogits.ptr(), Kernels.OUT_F32, xb.ptr(), w.lmHead, null, n, c.vocabSize(), dim); // (n, vocab)
    softcap(batchLogits.ptr(), n);
  }

  /**
   * Picks row i's next token of the last {@link #decodeBatch} into the device token slots, greedy
   * where temperature[i] is 0, else top-p at uniform u[i]; then waits and returns them in next.
   */
  public void pickBatch(int n, double[] temperature, double[] topP, double[] u, int[] next) {
    pickBatch(n, temperature, topP, u, null, next);
  }

  /** As above, row i held to masks[i] where it is non-null (see {@link #decodeStep}); masks null: none. */
  public void pickBatch(int n, double[] temperature, double[] topP, double[] u, long[][] masks, int[] next) {
    long vocab = c.vocabSize();
    for (int i = 0; i < n; i++) {
      CUdeviceptr row = batchLogits.at(i * vocab * 4), slot = tokens.at(i * 4L);
      CUdeviceptr mask = masks == null ? null : uploadMask(i, masks[i]);
      if (mask == null) {
        if (temperature[i] == 0) k.argmax(slot, row, c.vocabSize());
        else k.sampleTopP(slot, probs.ptr(), row, c.vocabSize(), (float) temperature[i], (float) topP[i], (float) u[i]);
      } else if (temperature[i] == 0) {
        k.argmaxMasked(slot, row, c.vocabSize(), mask);
      } else {
        k.sampleTopPMasked(slot, probs.ptr(), row, c.vocabSize(), (float) temperature[i], (float) topP[i], (float) u[i],
            mask);
      }
    }
    k.stream().copyToHost(Pointer.to(batchHost), tokens, 0, n * 4L);
    k.stream().synchronize();
    System.arraycopy(batchHost, 0, next, 0, n);
  }

  /** Final norm of row n-1 and the LM head → logits (vocab) on the device. */
  private void head(int n) {
    int dim = c.hiddenSize();
    k.rmsNorm(last.ptr(), x.at((long) (n - 1) * dim * 4), w.finalNorm.ptr(), 1, dim, c.rmsNormEps());
    mark(Profile.GEMM);
    linear(logits.ptr(), Kernels.OUT_F32, last.ptr(), w.lmHead, null, 1, c.vocabSize(), dim);
    softcap(logits.ptr(), 1);
    mark(Profile.OTHER);
  }

  private void mark(int bucket) {
    if (profile != null) profile.mark(k.stream(), bucket);
  }

  /** Greedy pick of the next token into the device token slot (no synchronisation). */
  public void sampleGreedy() {
    k.argmax(tokens.ptr(), logits.ptr(), c.vocabSize());
  }

  /** Top-p pick at uniform u into the device token slot (no synchronisation). */
  public void sampleTopP(float temperature, float topP, float u) {
    k.sampleTopP(tokens.ptr(), probs.ptr(), logits.ptr(), c.vocabSize(), temperature, topP, u);
  }

  /**
   * {@link #sampleGreedy} or {@link #sampleTopP} (temperature 0: greedy) held to a token mask (bit i of word
   * i / 64: token i allowed; null: none), copied to the device and applied there: the logits stay on the device.
   */
  public void sample(float temperature, float topP, float u, long[] mask) {
    CUdeviceptr m = mask == null ? null : uploadMask(0, mask);
    if (m == null) {
      if (temperature == 0) sampleGreedy();
      else sampleTopP(temperature, topP, u);
    } else if (temperature == 0) {
      k.argmaxMasked(tokens.ptr(), logits.ptr(), c.vocabSize(), m);
    } else {
      k.sampleTopPMasked(tokens.ptr(), probs.ptr(), logits.ptr(), c.vocabSize(), temperature, topP, u, m);
    }
  }

  /** Queues the copy of a mask to row {@code row} of the mask buffer; null for no mask. */
  private CUdeviceptr uploadMask(int row, long[] mask) {
    if (mask == null) return null;
    int words = Kernels.maskWords(c.vocabSize());
    long at = (long) row * words * 4;
    k.stream().copyToDevice(maskRows, at, Pointer.to(mask), Math.min((long) mask.length * 8, words * 4L));
    return maskRows.at(at);
  }

  /** Waits for the queued work and returns the picked token: the one synchronisation of a step. */
  public int readToken() {
    k.stream().copyToHost(Pointer.to(tokenHost), tokens, 0, 4);
    k.stream().synchronize();
    return tokenHost[0];
  }

  /** Waits for the queued work and copies the last logits into out (vocab). */
  public void readLogits(float[] out) {
    k.stream().copyToHost(Pointer.to(out), logits, 0, c.vocabSize() * 4L);
    k.stream().synchronize();
  }

  @Override
  public void close() {
    if (step != null) step.close();
    if (branches != null) branches.close();
    if (rope != null) rope.close();
    ws.close();
    if (fp8 != null) fp8.close();
    acts.forEach(DeviceBuffer::close);
  }

  /** Event timing of the forward pass by bucket, read after the work completes. */
  public static final class Profile implements AutoCloseable {
    public static final int OTHER = 0, GEMM = 1, ATTENTION = 2;
    private final List<CudaStream.Event> events = new ArrayList<>();
    private final List<Integer> buckets = new ArrayList<>();

    void mark(CudaStream s, int bucket) {
      events.add(s.record());
      buckets.add(bucket);
    }

    /** Milliseconds per bucket (OTHER, GEMM, ATTENTION) between consecutive marks. */
    public double[] millis() {
      double[] ms = new double[3];
      for (int i = 1; i < events.size(); i++) ms[buckets.get(i - 1)] += events.get(i).millisSince(events.get(i - 1));
      return ms;
    }

    @Override
    public void close() {
      events.forEach(CudaStream.Event::close);
      events.clear();
      buckets.clear();
    }
  }
}
