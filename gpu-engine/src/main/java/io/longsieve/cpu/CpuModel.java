package io.longsieve.cpu;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.cpu.policy.AttentionContext;
import io.longsieve.cpu.policy.AttentionPolicy;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;

/**
 * The forward pass of a Llama-family decoder in fp32 on the CPU, the reference for every other
 * backend. Reads top to bottom: embed, then per layer RMSNorm → q/k/v → cache → attention (the
 * one place a policy plugs in) → output projection → residual → RMSNorm → SwiGLU → residual; then
 * the final norm and the LM head for the last position. Activation buffers are sized once for the
 * largest chunk; one sequence runs at a time and uses every worker thread.
 */
public final class CpuModel implements AutoCloseable {

  private final ModelConfig c;
  private final CpuWeights w;
  private final Rope rope;
  private final ThreadPool pool;
  private final AttentionContext actx;
  private final int maxChunk;

  private final float[] x;       // (chunk, dim) residual stream
  private final float[] xb;      // (chunk, dim) normed input of a sub-block
  private final float[] q;       // (chunk, nHeads * headDim) queries before RoPE
  private final float[] k;       // (chunk, kvDim) keys before RoPE
  private final float[] v;       // (chunk, kvDim)
  private final float[] att;     // (chunk, nHeads * headDim) attention output
  private final float[] proj;    // (chunk, dim) output of wo / wDown
  private final float[] gate;    // (chunk, hidden)
  private final float[] up;      // (chunk, hidden)
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
    this.rope = new Rope(c);
    this.pool = pool;
    this.actx = new AttentionContext(c, rope, pool);
    this.maxChunk = maxChunk;
    int dim = c.hiddenSize();
    x = new float[maxChunk * dim];
    xb = new float[maxChunk * dim];
    q = new float[maxChunk * c.qDim()];
    k = new float[maxChunk * c.kvDim()];
    v = new float[maxChunk * c.kvDim()];
    att = new float[maxChunk * c.qDim()];
    proj = new float[maxChunk * dim];
    gate = new float[maxChunk * c.intermediateSize()];
    up = new float[maxChunk * c.intermediateSize()];
    last = new float[dim];
    qRow = new float[c.qDim()];
    attRow = new float[c.qDim()];
  }

  /** Most rows one forward chunk (or one batched decode group) takes. */
  public int maxChunk() {
    return maxChunk;
  }

  public ModelConfig config() {
    return c;
  }

  public Rope rope() {
    return rope;
  }

  public AttentionContext attentionContext() {
    return actx;
  }

  /** Installs (or with null removes) a layer observer; the forward pass is otherwise unchanged. */
  public synchronized void setLayerObserver(LayerObserver o) {
    observer = o;
    hIn = o == null ? null : new float[maxChunk * c.hiddenSize()];
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
    int step = io.longsieve.engine.spi.RequestLimits.prefillChunk(maxChunk); // a caller may ask for smaller chunks
    for (int s = from; s < to; s += step) {
      io.longsieve.engine.spi.RequestLimits.checkDeadline();
      int n = Math.min(step, to - s);
      chunk(tokens, s, n, pos0 + (s - from), kv, policy, decode && n == 1);
    }
    if (logits == null) return;
    int dim = c.hiddenSize();
    int lastRow = (to - from - 1) % step;
    CpuOps.rmsNorm(last, 0, x, lastRow * dim, w.finalNorm(), dim, c.rmsNormEps());
    CpuOps.matmul(pool, logits, last, 1, w.lmHead(), null, c.vocabSize(), dim);
  }

  /**
   * One decode step for {@code b} sequences: row i runs tokens[i] at positions[i] on caches[i]
   * with policies[i] and writes logits[i] (vocab). The weight matmuls take the rows together, so
   * each weight row is read once per four rows instead of once per row; attention runs per row on
   * its own cache with its own policy. Every element is the same dot product, in the same order, as
   * in a single-row {@link #forward}, so each row's logits equal its own decode's exactly. With a
   * layer observer installed, or a cache recording attention recall, the rows run one by one.
   */
  public synchronized void decodeBatch(int[] tokens, int[] positions, KvCache[] caches, AttentionPolicy[] policies,
                                       int b, float[][] logits) {
    if (observer != null || recorded(caches, b)) {
      for (int i = 0; i < b; i++) forward(tokens, i, i + 1, positions[i], caches[i], policies[i], true, logits[i]);
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
    for (int i = 0; i < n; i++) CpuOps.embed(x, i * dim, w.embed(), tokens[g + i], dim);
    for (int l = 0; l < c.numLayers(); l++) {
      CpuWeights.Layer lw = w.layers()[l];
      queriesKeysValues(lw, n);
      for (int i = 0; i < n; i++) {                                            // each row: its own cache and policy
        caches[g + i].append(l, k, i * kvDim, v, i * kvDim, 1, positions[g + i]);
        System.arraycopy(q, i * qDim, qRow, 0, qDim);
        policies[g + i].decode(l, qRow, positions[g + i], caches[g + i], attRow, actx);
        System.arraycopy(attRow, 0, att, i * qDim, qDim);
      }
      outputAndFeedForward(lw, n);
    }
    if (lastRows == null || lastRows.length < n * dim) {
      lastRows = new float[n * dim];
      logitRows = new float[n * vocab];
    }
    for (int i = 0; i < n; i++) CpuOps.rmsNorm(lastRows, i * dim, x, i * dim, w.finalNorm(), dim, eps);
    CpuOps.matmul(pool, logitRows, lastRows, n, w.lmHead(), null, vocab, dim);  // (n, vocab)
    for (int i = 0; i < n; i++) System.arraycopy(logitRows, i * vocab, logits[g + i], 0, vocab);
  }

  private void chunk(int[] tokens, int start, int n, int pos0, KvCache kv, AttentionPolicy policy, boolean decode) {
    int dim = c.hiddenSize();
    for (int i = 0; i < n; i++) CpuOps.embed(x, i * dim, w.embed(), tokens[start + i], dim);

    for (int l = 0; l < c.numLayers(); l++) {
      CpuWeights.Layer lw = w.layers()[l];
      if (observer != null) System.arraycopy(x, 0, hIn, 0, n * dim);
      // attention block
      queriesKeysValues(lw, n);
      kv.append(l, k, 0, v, 0, n, pos0);                                       // keys stored before RoPE
      AttentionRecorder recorder = kv.attended instanceof AttentionRecorder r ? r : null; // evaluation runs only
      if (recorder != null) recorder.beforeAttention(l, q, k, v, n, pos0, decode);
      if (decode) policy.decode(l, q, pos0, kv, att, actx);
      else policy.prefill(l, q, n, pos0, kv, att, actx);                       // (n, qDim)
      if (recorder != null) recorder.afterAttention(l);
      outputAndFeedForward(lw, n);
      if (observer != null) observer.layer(l, hIn, x, n, dim);
    }
  }

  /** q (n, qDim), k and v (n, kvDim) of the n rows of x: RMSNorm, then the projections (+ bias). */
  private void queriesKeysValues(CpuWeights.Layer lw, int n) {
    int dim = c.hiddenSize();
    for (int i = 0; i < n; i++) CpuOps.rmsNorm(xb, i * dim, x, i * dim, lw.attnNorm(), dim, c.rmsNormEps());
    CpuOps.matmul(pool, q, xb, n, lw.wq(), lw.bq(), c.qDim(), dim);          // (n, qDim)
    CpuOps.matmul(pool, k, xb, n, lw.wk(), lw.bk(), c.kvDim(), dim);         // (n, kvDim)
    CpuOps.matmul(pool, v, xb, n, lw.wv(), lw.bv(), c.kvDim(), dim);         // (n, kvDim)
  }

  /** x += att · woᵀ, then the feed-forward block: x += w_down · (silu(gate) * up) of RMSNorm(x). */
  private void outputAndFeedForward(CpuWeights.Layer lw, int n) {
    int dim = c.hiddenSize(), hidden = c.intermediateSize();
    CpuOps.matmul(pool, proj, att, n, lw.wo(), null, dim, c.qDim());         // (n, dim)
    for (int i = 0; i < n * dim; i++) x[i] += proj[i];
    for (int i = 0; i < n; i++) CpuOps.rmsNorm(xb, i * dim, x, i * dim, lw.ffnNorm(), dim, c.rmsNormEps());
    CpuOps.matmul(pool, gate, xb, n, lw.wGate(), null, hidden, dim);         // (n, hidden)
    CpuOps.matmul(pool, up, xb, n, lw.wUp(), null, hidden, dim);             // (n, hidden)
    CpuOps.swiglu(gate, up, n * hidden);
    CpuOps.matmul(pool, proj, gate, n, lw.wDown(), null, dim, hidden);       // (n, dim)
    for (int i = 0; i < n * dim; i++) x[i] += proj[i];
  }

  @Override
  public void close() {
    // weights are heap arrays and the pool belongs to the caller: nothing to release here
  }
}
