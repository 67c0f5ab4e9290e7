package io.longsieve.cpu;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.ThreadPool;
import io.longsieve.cpu.policy.AttentionPolicy;
import io.longsieve.cpu.policy.ComposedPolicy;
import io.longsieve.engine.spi.AttentionRecall;
import io.longsieve.engine.spi.KvSizedSequence;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.RequestLimits;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import io.longsieve.policy.PrefixReuse;
import java.nio.file.Path;

/** The CPU reference backend: fp32 weights on the heap, {@link CpuModel} for the math. */
public final class CpuRunner implements ModelRunner {

  private final ModelConfig config;
  private final ThreadPool pool;
  private final CpuModel model;
  private final Path modelDir; // where policies find per-model files (TSA's sparse-layer profile); may be null

  public CpuRunner(ModelConfig config, Checkpoint ck, int threads, int prefillChunk) {
    this(config, ck, threads, prefillChunk, null);
  }

  public CpuRunner(ModelConfig config, Checkpoint ck, int threads, int prefillChunk, Path modelDir) {
    this.config = config;
    this.modelDir = modelDir;
    this.pool = new ThreadPool(threads);
    this.model = new CpuModel(config, CpuWeights.load(ck, config), pool, prefillChunk);
  }

  public CpuModel model() {
    return model;
  }

  @Override
  public ModelConfig config() {
    return config;
  }

  @Override
  public String backend() {
    return "cpu";
  }

  @Override
  public String device() {
    return "cpu:" + pool.threads() + " threads" + (CpuOps.VECTOR ? " simd" : "") + (CpuOps.nativeTiles() ? " native" : "");
  }

  @Override
  public Sequence open(int capacity, PolicySpec policy) {
    int fixed = fixedChunk(policy);
    return new CpuSequence(model.newCache(capacity), ComposedPolicy.of(policy, modelDir), policy, fixed);
  }

  /** The chunk {@code policy} fixes (PolicySpec.prefillChunk), checked against the activations' bound. */
  private int fixedChunk(PolicySpec policy) {
    int fixed = policy.prefillChunk();
    if (fixed > 0) checkActivations(fixed, "tsa:chunk=" + fixed);
    return fixed;
  }

  /**
   * The CPU's bound on a chunk a policy fixes (TSA's {@code chunk}; 0 = the whole prompt): its
   * activations ({@link CpuModel#activationBytes}) may take at most a quarter of the heap the JVM
   * may grow to (-Xmx), next to the weights and the caches.
   *
   * @throws IllegalArgumentException beyond it, before any work
   */
  void checkActivations(int rows, String what) {
    if (rows <= model.maxChunk()) return;
    long need = CpuModel.activationBytes(config, rows), limit = Runtime.getRuntime().maxMemory() / 4;
    if (need > limit) {
      throw new IllegalArgumentException(what + " needs " + need / (1 << 20) + " MiB of activations on the CPU, over "
          + "its limit of " + limit / (1 << 20) + " MiB (a quarter of the heap, -Xmx): use a smaller tsa:chunk (e.g. "
          + "the default 4096) or a larger heap");
    }
  }

  /** Keys before RoPE, keys after RoPE and values in fp32, plus the slot's position, per layer. */
  @Override
  public long kvBytesPerSlot() {
    return (long) config.numLayers() * (3L * config.kvDim() * Float.BYTES + Integer.BYTES);
  }

  /** Half of the heap the JVM may still grow to: the caches are heap arrays next to the weights. */
  @Override
  public long defaultKvBudgetBytes() {
    Runtime rt = Runtime.getRuntime();
    long free = rt.maxMemory() - (rt.totalMemory() - rt.freeMemory());
    return Math.max(free / 2, kvBytesPerSlot());
  }

  /**
   * Prefix reuse: prefill parts are cut into forward chunks of the request's prefill chunk; dense
   * prefill computes each token the same wherever a chunk starts (every matmul row and attention row
   * is its own dot products in a fixed order; EngineTest and PrefixReuseTest hold it), so a dense
   * prefix may end anywhere.
   */
  @Override
  public PrefixReuse.Cuts prefixCuts() {
    return new PrefixReuse.Cuts(RequestLimits.prefillChunk(model.maxChunk()), true);
  }

  /** A quarter of the default KV budget: kept prefixes are heap arrays beside the running caches. */
  @Override
  public long defaultPrefixCacheBytes() {
    return defaultKvBudgetBytes() / 4;
  }

  /** The fork copies the prefix's slots into its own cache (the CPU has no pages to share). */
  @Override
  public Sequence openFork(int capacity, PolicySpec policy, KeptPrefix prefix) {
    CpuPrefix p = (CpuPrefix) prefix;
    if (p.kv == null) throw new IllegalStateException("the kept prefix was closed");
    int fixed = fixedChunk(policy); // a TSA fork prefills in its own chunk from a prefix that ends on one (PrefixReuse)
    KvCache kv = model.newCache(capacity);
    kv.copyPrefix(p.kv, p.tokens);
    ComposedPolicy cp = ComposedPolicy.of(policy, modelDir);
    cp.adoptPrefixState(p.state, kv, model.attentionContext());
    return new CpuSequence(kv, cp, policy, fixed);
  }

  /** A kept prefix on the heap: a cache of exactly its slots and the policy's state at its end. */
  private static final class CpuPrefix implements KeptPrefix {
    private final int tokens;
    private final long bytes;
    private KvCache kv;  // null once closed
    private final ComposedPolicy.PrefixState state;

    CpuPrefix(KvCache kv, int tokens, ComposedPolicy.PrefixState state, long bytes) {
      this.kv = kv;
      this.tokens = tokens;
      this.state = state;
      this.bytes = bytes;
    }

    @Override
    public int tokens() {
      return tokens;
    }

    @Override
    public long bytes() {
      return bytes;
    }

    @Override
    public void close() {
      kv = null; // the garbage collector takes the arrays once no fork is being copied from them
    }
  }

  /** Batched decode: the rows go through the weight matmuls together ({@link CpuModel#decodeBatch}). */
  @Override
  public void decodeBatch(Sequence[] seqs, int[] tokens, int[] positions, float[][] logits, Sampler[] samplers,
                          int[] next, int n) {
    if (n == 1 || model.ropeDependsOnLength()) { // nothing to share the weights with; or each row its own RoPE table
      for (int i = 0; i < n; i++) next[i] = seqs[i].decodeNext(tokens[i], positions[i], logits[i], samplers[i]);
      return;
    }
    KvCache[] caches = new KvCache[n];
    AttentionPolicy[] policies = new AttentionPolicy[n];
    for (int i = 0; i < n; i++) {
      CpuSequence s = (CpuSequence) seqs[i];
      caches[i] = s.kv;
      policies[i] = s.timed;
    }
    model.decodeBatch(tokens, positions, caches, policies, n, logits);
    for (int i = 0; i < n; i++) next[i] = samplers[i].next(logits[i], logits[i].length);
  }

  @Override
  public void close() {
    model.close();
    pool.close();
  }

  private final class CpuSequence extends KvSizedSequence {
    private final PolicySpec spec;
    private KvCache kv;                   // replaced, with the policy, when a LongRoPE sequence is recomputed
    private ComposedPolicy policy;
    private TimedPolicy timed;
    private final int fixedChunk;         // the chunk the policy fixes (PolicySpec.prefillChunk): -1 none, 0 the prompt
    private final int[] one = new int[1]; // the decode step's token
    private final int[] history;          // (capacity) tokens so far, kept only for a LongRoPE recompute; else null
    private AttentionRecorder recorder;   // null unless an evaluation asked for attention recall
    private int[] recallPositions;        // the positions it probes, to record again after a LongRoPE recompute

    /** kv: a fresh cache, or a fork's holding a kept prefix whose state policy has adopted. */
    CpuSequence(KvCache kv, ComposedPolicy policy, PolicySpec spec, int fixedChunk) {
      this.spec = spec;
      this.kv = kv;
      this.policy = policy;
      this.timed = new TimedPolicy(policy);
      this.fixedChunk = fixedChunk;
      this.history = config.ropeScaling().type().equals("longrope") ? new int[kv.capacity] : null;
    }

    /**
     * Prompt tokens per forward chunk: the policy's own chunk where it fixes one (TSA selects once
     * per chunk: neither the engine's chunk nor a request's smaller one (RequestLimits) changes
     * it), else the engine's.
     */
    private int step(int promptTokens) {
      if (fixedChunk < 0) return RequestLimits.prefillChunk(model.maxChunk());
      int step = fixedChunk == 0 ? Math.max(1, promptTokens) : fixedChunk;
      if (fixedChunk == 0) checkActivations(step, "tsa:chunk=0 (the whole " + promptTokens + "-token prompt in one chunk)");
      return step;
    }

    @Override
    public void prefill(int[] tokens, float[] logits) {
      remember(tokens, 0, tokens.length);
      model.forward(tokens, 0, tokens.length, 0, kv, timed, false, logits, step(tokens.length));
      afterPrefill(tokens.length);
    }

    private void remember(int[] tokens, int from, int to) {
      if (history != null) System.arraycopy(tokens, from, history, from, to - from);
    }

    /** After a prompt of {@code length} tokens: its compression re-rotates with that call's RoPE table. */
    private void afterPrefill(int length) {
      // the compression is not attention (the CUDA backend's events leave it out too): prefill_ms has it
      compressMeasured(() -> policy.afterPrefill(kv, model.attentionContext(length)));
    }

    /** One forward chunk: the parts then cut the prompt exactly where one {@link #prefill} call does. */
    @Override
    public int prefillPartTokens() {
      return fixedChunk == 0 ? Integer.MAX_VALUE : fixedChunk > 0 ? fixedChunk : RequestLimits.prefillChunk(model.maxChunk());
    }

    @Override
    public int prefillPart(int[] tokens, int from, int to, float[] logits, Sampler sampler) {
      boolean last = to == tokens.length;
      // the whole prompt once it is cached: a fork's parts start after the kept prefix, whose tokens a
      // LongRoPE recompute needs too (the fork is then recomputed from its tokens, as it is alone)
      if (last) remember(tokens, 0, to);
      model.forward(tokens, from, to, from, kv, timed, false, last ? logits : null, step(tokens.length));
      if (!last) return -1;
      afterPrefill(tokens.length);
      return sampler.next(logits, logits.length);
    }

    @Override
    public KeptPrefix keepPrefix(int tokens) {
      for (int l = 0; l < kv.layers; l++) {
        if (kv.length(l) != tokens) throw new IllegalStateException("layer " + l + " holds " + kv.length(l) + " slots, not " + tokens);
      }
      KvCache copy = model.newCache(tokens);
      copy.copyPrefix(kv, tokens);
      ComposedPolicy.PrefixState state = policy.keepPrefixState(tokens, model.attentionContext());
      return new CpuPrefix(copy, tokens, state, tokens * kvBytesPerSlot() + state.bytes());
    }

    @Override
    public void decode(int token, int pos, float[] logits) {
      if (history != null) history[pos] = token;
      if (config.ropeScaling().recomputesCacheAt(pos)) {  // LongRoPE's first step past its original window
        recompute(pos + 1, logits);
        return;
      }
      one[0] = token;
      model.forward(one, 0, 1, pos, kv, timed, true, logits);
    }

    /**
     * Runs the sequence's first {@code length} tokens again into a fresh cache, as one prefill (the
     * long LongRoPE factors for all of them), with a fresh policy object whose compression then runs
     * on the recomputed prompt: transformers' Phi-3 generation drops its cache here the same way.
     */
    private void recompute(int length, float[] logits) {
      kv = model.newCache(kv.capacity);
      // recall follows the cache the sequence goes on with: recorded afresh from the recomputed prompt (what was
      // recorded on the replaced cache, under the short factors, no longer describes the run)
      if (recorder != null) recordAttention(recallPositions);
      policy = ComposedPolicy.of(spec, modelDir);
      timed = new TimedPolicy(policy);
      model.forward(java.util.Arrays.copyOf(history, length), 0, length, 0, kv, timed, false, logits, step(length));
      afterPrefill(length);
    }

    /** Installs an {@link AttentionRecorder} on this sequence's cache (evaluation only). */
    @Override
    public void recordAttention(int[] positions) {
      recallPositions = positions.clone();
      recorder = new AttentionRecorder(config, model.rope(), kv, positions);
      kv.attended = recorder;
    }

    @Override
    public AttentionRecall attentionRecall() {
      return recorder == null ? null : recorder.result();
    }

    @Override
    public long kvBytes() {
      return kv.bf16Bytes();
    }

    @Override
    public double attentionMs() {
      return timed.nanos / 1e6;
    }

    @Override
    public PolicyStats policyStats() {
      return policy.stats();
    }

    @Override
    public String policyResolved() {
      return policy.describe();
    }

    @Override
    public void close() {
      // heap-only state; the garbage collector takes the cache
    }
  }

  /**
   * Wraps a policy to time its calls, so stats can split attention from the rest of the step. Decode
   * calls are timed too (profile reads them); the stats take the prefill's share alone.
   */
  private static final class TimedPolicy implements AttentionPolicy {
    private final AttentionPolicy inner;
    long nanos;

    TimedPolicy(AttentionPolicy inner) {
      this.inner = inner;
    }

    @Override
    public String describe() {
      return inner.describe();
    }

    @Override
    public void prefill(int layer, float[] q, int n, int pos0, KvCache kv, float[] out,
                        io.longsieve.cpu.policy.AttentionContext ctx) {
      long t = System.nanoTime();
      inner.prefill(layer, q, n, pos0, kv, out, ctx);
      nanos += System.nanoTime() - t;
    }

    @Override
    public void decode(int layer, float[] q, int pos, KvCache kv, float[] out,
                       io.longsieve.cpu.policy.AttentionContext ctx) {
      long t = System.nanoTime();
      inner.decode(layer, q, pos, kv, out, ctx);
      nanos += System.nanoTime() - t;
    }
  }
}
