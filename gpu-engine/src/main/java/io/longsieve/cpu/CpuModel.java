package io.longsieve.cpu;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.FamilyOps;
import io.longsieve.cpu.kernels.Gemm;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.PackedMatrix;
import io.longsieve.cpu.kernels.RopeTable;
import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.cpu.kernels.TiledAttention;
import io.longsieve.cpu.policy.AttentionContext;
import io.longsieve.cpu.policy.AttentionPolicy;
import io.longsieve.model.FamilyTraits;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import java.util.IdentityHashMap;
import java.util.Map;

/**
 * The forward pass of a decoder in fp32 on the CPU, the reference for every other backend. Reads
 * top to bottom: embed (× the family's embedding scale), then per layer RMSNorm → q/k/v (→ per-head
 * q/k RMSNorm) → cache → attention (the one place a policy plugs in, with the layer's RoPE and
 * window) → output projection (→ norm) → residual → RMSNorm → SwiGLU or GeGLU (→ norm) → residual;
 * then the final norm, the LM head for the last position (→ soft-capping). The bracketed steps are
 * the {@link FamilyTraits} of Qwen3 and Gemma 3. Activation buffers are sized once for the largest
 * chunk; one sequence runs at a time and uses every worker thread.
 *
 * <p>RoPE: each layer rotates with its kind's table ({@link Rope#forLayer}). A length-dependent
 * scaling (dynamic NTK, LongRoPE) takes the table of the call's reach, the position after the last
 * token of the {@code tokens} array a forward call gets: a prompt run in parts takes the whole
 * prompt's table, as transformers' one call over the prompt does, and a decode step its own.
 */
public final class CpuModel implements AutoCloseable {

  private final ModelConfig c;
  private final CpuWeights w;
  private final Rope rope;                   // the full-attention layers' table (the model-level context's)
  private final Rope[] layerRopes;           // (layers) each layer's table at the config's length; one instance per kind
  private final TiledAttention.PackedTiles tiles = new TiledAttention.PackedTiles(); // attention's packed key tiles
  // RoPE angle tables by the Rope they tabulate: per layer kind, plus per call for length-dependent scalings
  // (a weak map: a dynamic-NTK call's table is dropped with its Rope)
  private final Map<Rope, RopeTable> ropeTables = java.util.Collections.synchronizedMap(new java.util.WeakHashMap<>());
  private final AttentionContext[] layerCtx; // (layers) each layer's context at the config's length
  private final boolean ropeByLength;        // dynamic NTK or LongRoPE: tables follow each call's reach
  private final ThreadPool pool;
  private final AttentionContext actx;
  private final int maxChunk;
  private int rows;              // rows the activations below hold: maxChunk, or a longer chunk a request fixed

  // activations, (rows, ...); grown (never shrunk) when a request's policy fixes a longer chunk (TSA)
  private float[] x;             // (chunk, dim) residual stream
  private float[] xb;            // (chunk, dim) normed input of a sub-block
  private float[] q;             // (chunk, nHeads * headDim) queries before RoPE
  private float[] k;             // (chunk, kvDim) keys before RoPE
  private float[] v;             // (chunk, kvDim)
  private float[] att;           // (chunk, nHeads * headDim) attention output
  private float[] proj;          // (chunk, dim) output of wo / wDown
  private float[] gate;          // (chunk, hidden) act(gate) · up
  private float[] up;            // (chunk, hidden) GeGLU families only
  private final float[] last;    // (dim) final-normed last position
  private final float[] qRow;    // (qDim) one batched decode row's query, for its own policy
  private final float[] attRow;  // (qDim) its attention output
  private float[] lastRows;      // (batch, dim) final-normed rows of a batched decode; grown on demand
  private float[] logitRows;     // (batch, vocab) their logits; grown on demand
  private LayerObserver observer; // null: none (the normal case)
  private float[] hIn;            // (chunk, dim) residual stream entering the layer, only while observed

  /** Sees each layer's residual stream before and after it (drift profiling); rows 0 .. n-1 of (n, dim). */
  @FunctionalInterface
  public interface LayerObserver {
    void layer(int layer, float[] hIn, float[] hOut, int n, int dim);
  }

  public CpuModel(ModelConfig c, CpuWeights w, ThreadPool pool, int maxChunk) {
    this.c = c;
    this.w = w;
    this.pool = pool;
    this.maxChunk = maxChunk;
    this.layerRopes = new Rope[c.numLayers()];
    this.layerCtx = new AttentionContext[c.numLayers()];
    Map<io.longsieve.model.LayerKind, Rope> byKind = new java.util.HashMap<>();
    Rope full = null;
    boolean byLength = false;
    for (int l = 0; l < c.numLayers(); l++) {
      int layer = l;
      layerRopes[l] = byKind.computeIfAbsent(c.layerKind(l), k -> Rope.forLayer(c, layer));
      if (full == null && !c.layerKind(l).sliding()) full = layerRopes[l];
      layerCtx[l] = context(layerRopes[l], c.window(l));
      byLength |= layerRopes[l].dependsOnLength();
    }
    this.rope = full != null ? full : new Rope(c);
    this.actx = context(rope, c.slidingLayers() == c.numLayers() ? c.slidingWindow() : 0);
    this.ropeByLength = byLength;
    int dim = c.hiddenSize();
    allocate(maxChunk);
    last = new float[dim];
    qRow = new float[c.qDim()];
    attRow = new float[c.qDim()];
  }

  /** Whether some layer's RoPE table follows each call's length (dynamic NTK, LongRoPE). */
  public boolean ropeDependsOnLength() {
    return ropeByLength;
  }

  /** The engine's prefill chunk: most rows one forward chunk takes unless a request fixes its own (and one batched decode group). */
  public int maxChunk() {
    return maxChunk;
  }

  /**
   * Heap bytes of the activations for chunks of {@code rows} rows (f32: residual, normed input,
   * queries, keys, values, attention output, projection, gate and up), what a chunk longer than
   * the engine's grows them to.
   */
  public static long activationBytes(ModelConfig c, int rows) {
    long perRow = 3L * c.hiddenSize() + 2L * c.qDim() + 2L * c.kvDim() + 2L * c.intermediateSize();
    return perRow * rows * Float.BYTES;
  }

  private void allocate(int n) {
    int dim = c.hiddenSize();
    rows = n;
    x = new float[n * dim];
    xb = new float[n * dim];
    q = new float[n * c.qDim()];
    k = new float[n * c.kvDim()];
    v = new float[n * c.kvDim()];
    att = new float[n * c.qDim()];
    proj = new float[n * dim];
    gate = new float[n * c.intermediateSize()];
    up = new float[n * c.intermediateSize()];
    if (hIn != null) hIn = new float[n * dim];
  }

  public ModelConfig config() {
    return c;
  }

  public Rope rope() {
    return rope;
  }

  /** The full-attention layers' context at the config's length (tests, tools). */
  public AttentionContext attentionContext() {
    return actx;
  }

  /**
   * The full-attention layers' context for a call that reached {@code length} positions: what a KV
   * compression after a prompt of that length re-rotates with (sliding layers it leaves alone).
   */
  public AttentionContext attentionContext(int length) {
    Rope r = rope.atLength(length);
    return r == rope ? actx : context(r, actx.window());
  }

  /**
   * Each layer's context for a call reaching {@code length}: the tables of the config's length, or
   * for a length-dependent scaling each kind's table at that length, one instance per kind (so a
   * policy's cached RoPE table follows it without rebuilding per layer).
   */
  private AttentionContext[] contexts(int length) {
    if (!ropeByLength) return layerCtx;
    AttentionContext[] out = new AttentionContext[layerCtx.length];
    Map<Rope, AttentionContext> seen = new IdentityHashMap<>();
    for (int l = 0; l < out.length; l++) {
      int layer = l;
      out[l] = seen.computeIfAbsent(layerRopes[l], r -> context(r.atLength(length), c.window(layer)));
    }
    return out;
  }

  /**
   * A context rotating with r: one table of r's angles however many layers share r (the layers of
   * one kind), and the model's one set of attention tile buffers (one forward runs at a time).
   */
  private AttentionContext context(Rope r, int window) {
    return new AttentionContext(c, r, pool, window, ropeTables.computeIfAbsent(r, RopeTable::new), tiles);
  }

  /** Installs (or with null removes) a layer observer; the forward pass is otherwise unchanged. */
  public synchronized void setLayerObserver(LayerObserver o) {
    observer = o;
    hIn = o == null ? null : new float[rows * c.hiddenSize()];
  }

  public KvCache newCache(int capacity) {
    return new KvCache(c, rope, capacity);
  }

  /**
   * Runs tokens[from, to) at positions pos0.. through the model in chunks of at most maxChunk,
   * appending to the cache, and writes the logits of the last token into {@code logits} (vocab;
   * null skips the LM head, for a prefill part that is not the last).
   */
  public synchronized void forward(int[] tokens, int from, int to, int pos0, KvCache kv, AttentionPolicy policy,
                                   boolean decode, float[] logits) {
    // a caller may ask for smaller chunks (RequestLimits)
    forward(tokens, from, to, pos0, kv, policy, decode, logits, io.longsieve.engine.spi.RequestLimits.prefillChunk(maxChunk));
  }

  /**
   * As {@link #forward(int[], int, int, int, KvCache, AttentionPolicy, boolean, float[])} in chunks
   * of exactly {@code step} tokens (the last one shorter): a chunk the request's policy fixes (TSA
   * selects once per chunk, PolicySpec.prefillChunk). A step longer than the activations grows
   * them (kept for later requests); the caller bounds it ({@link #activationBytes}).
   */
  public synchronized void forward(int[] tokens, int from, int to, int pos0, KvCache kv, AttentionPolicy policy,
                                   boolean decode, float[] logits, int step) {
    if (step < 1) throw new IllegalArgumentException("chunk of " + step + " tokens");
    if (step > rows && to - from > rows) allocate(Math.min(step, to - from));
    AttentionContext[] ctxs = contexts(pos0 - from + tokens.length);
    for (int s = from; s < to; s += step) {
      io.longsieve.engine.spi.RequestLimits.checkDeadline();
      int n = Math.min(step, to - s);
      chunk(tokens, s, n, pos0 + (s - from), kv, policy, decode && n == 1, ctxs);
    }
    if (logits == null) return;
    int dim = c.hiddenSize();
    int lastRow = (to - from - 1) % step;
    CpuOps.rmsNorm(last, 0, x, lastRow * dim, w.finalNorm(), dim, c.rmsNormEps());
    Gemm.matmul(pool, logits, last, 1, w.lmHead());
    softcap(logits, 1);
  }

  /** Gemma's final_logit_softcapping over n rows of logits, when the model has it. */
  private void softcap(float[] logits, int n) {
    double cap = c.traits().finalLogitSoftcap();
    if (cap > 0) FamilyOps.softcap(logits, 0, n * c.vocabSize(), (float) cap);
  }

  /**
   * One decode step for {@code b} sequences: row i runs tokens[i] at positions[i] on caches[i]
   * with policies[i] and writes logits[i] (vocab). The weight matmuls take the rows together, so
   * each weight is read once per step for all of them ({@link Gemm}); attention runs per row on its
   * own cache with its own policy. Every element is the same fma chain, in the same order, as in a
   * single-row {@link #forward}, so each row's logits equal its own decode's exactly. With a layer
   * observer installed, a length-dependent RoPE, or a cache recording attention recall, the rows run
   * one by one.
   */
  public synchronized void decodeBatch(int[] tokens, int[] positions, KvCache[] caches, AttentionPolicy[] policies,
                                       int b, float[][] logits) {
    if (observer != null || ropeByLength || recorded(caches, b)) { // one sequence at a time (length-dependent RoPE: each row its own table)
      for (int i = 0; i < b; i++) {
        forward(new int[] {tokens[i]}, 0, 1, positions[i], caches[i], policies[i], true, logits[i]);
      }
      return;
    }
    for (int g = 0; g < b; g += maxChunk) decodeRows(tokens, positions, caches, policies, g, Math.min(maxChunk, b - g),
        logits);
  }

  /** True when one of the caches is recording attention recall (its rows then run one by one, through chunk). */
  private static boolean recorded(KvCache[] caches, int b) {
    for (int i = 0; i < b; i++) if (caches[i].attended != null) return true;
    return false;
  }

  private void decodeRows(int[] tokens, int[] positions, KvCache[] caches, AttentionPolicy[] policies, int g, int n,
                          float[][] logits) {
    int dim = c.hiddenSize(), qDim = c.qDim(), kvDim = c.kvDim(), vocab = c.vocabSize();
    double eps = c.rmsNormEps();
    for (int i = 0; i < n; i++) embed(i, tokens[g + i]);
    for (int l = 0; l < c.numLayers(); l++) {
      CpuWeights.Layer lw = w.layers()[l];
      AttentionContext ctx = layerCtx[l];
      queriesKeysValues(lw, n);
      for (int i = 0; i < n; i++) {                                            // each row: its own cache and policy
        caches[g + i].append(l, k, i * kvDim, v, i * kvDim, 1, positions[g + i], ctx.rope());
        System.arraycopy(q, i * qDim, qRow, 0, qDim);
        policies[g + i].decode(l, qRow, positions[g + i], caches[g + i], attRow, ctx);
        System.arraycopy(attRow, 0, att, i * qDim, qDim);
      }
      outputAndFeedForward(lw, n);
    }
    if (lastRows == null || lastRows.length < n * dim) {
      lastRows = new float[n * dim];
      logitRows = new float[n * vocab];
    }
    for (int i = 0; i < n; i++) CpuOps.rmsNorm(lastRows, i * dim, x, i * dim, w.finalNorm(), dim, eps);
    Gemm.matmul(pool, logitRows, lastRows, n, w.lmHead());                   // (n, vocab)
    softcap(logitRows, n);
    for (int i = 0; i < n; i++) System.arraycopy(logitRows, i * vocab, logits[g + i], 0, vocab);
  }

  private void chunk(int[] tokens, int start, int n, int pos0, KvCache kv, AttentionPolicy policy, boolean decode,
                     AttentionContext[] ctxs) {
    int dim = c.hiddenSize();
    for (int i = 0; i < n; i++) embed(i, tokens[start + i]);

    for (int l = 0; l < c.numLayers(); l++) {
      CpuWeights.Layer lw = w.layers()[l];
      AttentionContext ctx = ctxs[l];                                          // the layer's RoPE and window
      if (observer != null) System.arraycopy(x, 0, hIn, 0, n * dim);
      // attention block
      queriesKeysValues(lw, n);
      kv.append(l, k, 0, v, 0, n, pos0, ctx.rope());                           // keys stored before RoPE
      AttentionRecorder recorder = kv.attended instanceof AttentionRecorder r ? r : null; // evaluation runs only
      if (recorder != null) recorder.beforeAttention(l, q, k, v, n, pos0, decode, ctx);
      if (decode) policy.decode(l, q, pos0, kv, att, ctx);
      else policy.prefill(l, q, n, pos0, kv, att, ctx);                        // (n, qDim)
      if (recorder != null) recorder.afterAttention(l, ctx);
      outputAndFeedForward(lw, n);
      if (observer != null) observer.layer(l, hIn, x, n, dim);
    }
  }

  /** Row i of x (dim) = the embedding of token, times the family's embedding scale. */
  private void embed(int i, int token) {
    int dim = c.hiddenSize();
    CpuOps.embed(x, i * dim, w.embed(), token, dim);
    double s = c.traits().embedScale();
    if (s != 1) FamilyOps.scale(x, i * dim, dim, (float) s);                 // Gemma: √dim, in fp32
  }

  /**
   * q (n, qDim), k and v (n, kvDim) of the n rows of x: RMSNorm, then the projections (+ bias),
   * then (Qwen3, Gemma 3) an RMSNorm over each head of q and of k.
   */
  private void queriesKeysValues(CpuWeights.Layer lw, int n) {
    int dim = c.hiddenSize(), d = c.headDim();
    for (int i = 0; i < n; i++) CpuOps.rmsNorm(xb, i * dim, x, i * dim, lw.attnNorm(), dim, c.rmsNormEps());
    Gemm.matmul(pool, q, xb, n, lw.wq());                                    // (n, qDim)
    Gemm.matmul(pool, k, xb, n, lw.wk());                                    // (n, kvDim)
    Gemm.matmul(pool, v, xb, n, lw.wv());                                    // (n, kvDim)
    if (lw.qNorm() != null) {
      FamilyOps.headNorm(q, 0, n, c.qDim(), c.numHeads(), d, lw.qNorm(), c.rmsNormEps());    // (n, nHeads, d)
      FamilyOps.headNorm(k, 0, n, c.kvDim(), c.numKvHeads(), d, lw.kNorm(), c.rmsNormEps()); // (n, nKv, d)
    }
  }

  /**
   * x += att · woᵀ (normed first where the family norms the attention output), then the
   * feed-forward block: x += w_down · (act(gate) * up) of RMSNorm(x), act SiLU or the tanh GELU
   * (normed before it joins the residual where the family says so).
   */
  private void outputAndFeedForward(CpuWeights.Layer lw, int n) {
    int dim = c.hiddenSize(), hidden = c.intermediateSize();
    addToResidual(att, n, lw.wo(), lw.postAttnNorm());                       // x (n, dim) += [norm](att · woᵀ)
    for (int i = 0; i < n; i++) CpuOps.rmsNorm(xb, i * dim, x, i * dim, lw.ffnNorm(), dim, c.rmsNormEps());
    if (lw.wGateUp() != null) {
      Gemm.swiglu(pool, gate, xb, n, lw.wGateUp());                          // (n, hidden) silu(gate) · up
    } else {
      Gemm.matmul(pool, gate, xb, n, lw.wGate());                            // (n, hidden)
      Gemm.matmul(pool, up, xb, n, lw.wUp());                                // (n, hidden)
      FamilyOps.geglu(gate, up, n * hidden);                                 // gelu_tanh(gate) · up
    }
    addToResidual(gate, n, lw.wDown(), lw.postFfnNorm());                    // x (n, dim) += [norm](gate · w_downᵀ)
  }

  /**
   * x (n, dim) += in · wᵀ, RMS-normed with {@code norm} first when the family norms the sub-block's
   * output (Gemma 3's sandwich norms); without one the residual add runs in the GEMM's epilogue.
   */
  private void addToResidual(float[] in, int n, PackedMatrix w, float[] norm) {
    if (norm == null) {
      Gemm.matmulAdd(pool, x, in, n, w);
      return;
    }
    int dim = c.hiddenSize();
    Gemm.matmul(pool, proj, in, n, w);                                       // (n, dim)
    for (int i = 0; i < n; i++) CpuOps.rmsNorm(proj, i * dim, proj, i * dim, norm, dim, c.rmsNormEps());
    for (int i = 0; i < n * dim; i++) x[i] += proj[i];
  }

  @Override
  public void close() {
    // weights are heap arrays and the pool belongs to the caller: nothing to release here
  }
}
