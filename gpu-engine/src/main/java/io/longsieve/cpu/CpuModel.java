package io.longsieve.cpu;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.Gemm;
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
  private final float[] gate;    // (chunk, hidden) silu(gate) · up
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
    gate = new float[maxChunk * c.intermediateSize()];
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
    Gemm.matmul(pool, logits, last, 1, w.lmHead());
  }

  /**
   * One decode step for {@code b} sequences: row i runs tokens[i] at positions[i] on caches[i]
   * with policies[i] and writes logits[i] (vocab). The weight matmuls take the rows together, so
   * each weight is read once per step for all of them ({@link Gemm}); attention runs per row on its
   * own cache with its own policy. Every element is the same fma chain, in the same order, as in a
   * single-row {@link #forward}, so each row's logits equal its own decode's exactly. With a
   * layer observer installed the rows run one by one (the observer sees one sequence at a time).
   */
  public synchronized void decodeBatch(int[] tokens, int[] positions, KvCache[] caches, AttentionPolicy[] policies,
                                       int b, float[][] logits) {
    if (observer != null) {
      for (int i = 0; i < b; i++) forward(tokens, i, i + 1, positions[i], caches[i], policies[i], true, logits[i]);
      return;
    }
    for (int g = 0; g < b; g += maxChunk) decodeRows(tokens, positions, caches, policies, g, Math.min(maxChunk, b - g),
        logits);
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
    Gemm.matmul(pool, logitRows, lastRows, n, w.lmHead());                   // (n, vocab)
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
      if (decode) policy.decode(l, q, pos0, kv, att, actx);
      else policy.prefill(l, q, n, pos0, kv, att, actx);                       // (n, qDim)
      outputAndFeedForward(lw, n);
      if (observer != null) observer.layer(l, hIn, x, n, dim);
    }
  }

  /** q (n, qDim), k and v (n, kvDim) of the n rows of x: RMSNorm, then the projections (+ bias). */
  private void queriesKeysValues(CpuWeights.Layer lw, int n) {
    int dim = c.hiddenSize();
    for (int i = 0; i < n; i++) CpuOps.rmsNorm(xb, i * dim, x, i * dim, lw.attnNorm(), dim, c.rmsNormEps());
    Gemm.matmul(pool, q, xb, n, lw.wq());                                    // (n, qDim)
    Gemm.matmul(pool, k, xb, n, lw.wk());                                    // (n, kvDim)
    Gemm.matmul(pool, v, xb, n, lw.wv());                                    // (n, kvDim)
  }

  /** x += att · woᵀ, then the feed-forward block: x += w_down · (silu(gate) * up) of RMSNorm(x). */
  private void outputAndFeedForward(CpuWeights.Layer lw, int n) {
    int dim = c.hiddenSize();
    Gemm.matmulAdd(pool, x, att, n, lw.wo());                                // x (n, dim) += att · woᵀ
    for (int i = 0; i < n; i++) CpuOps.rmsNorm(xb, i * dim, x, i * dim, lw.ffnNorm(), dim, c.rmsNormEps());
    Gemm.swiglu(pool, gate, xb, n, lw.wGateUp());                            // (n, hidden)
    Gemm.matmulAdd(pool, x, gate, n, lw.wDown());                            // x (n, dim) += gate · w_downᵀ
  }

  @Override
  public void close() {
    // weights are heap arrays and the pool belongs to the caller: nothing to release here
  }
}
