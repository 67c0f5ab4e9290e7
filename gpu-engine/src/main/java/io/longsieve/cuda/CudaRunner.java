package io.longsieve.cuda;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.KernelModule;
import io.longsieve.cuda.kernels.Fp8Kernels;
import io.longsieve.cuda.kernels.Gemv;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kv.KeptPages;
import io.longsieve.cuda.kv.KvPagePool;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.cuda.policy.GpuEnv;
import io.longsieve.cuda.policy.GpuPolicy;
import io.longsieve.engine.spi.EngineSpec;
import io.longsieve.engine.spi.KvSizedSequence;
import io.longsieve.engine.spi.LoadedModel;
import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.engine.spi.SamplingParams;
import io.longsieve.model.Checkpoint;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import io.longsieve.policy.PrefixReuse;
import java.util.Arrays;

/**
 * The CUDA backend: one context on the GPU the spec names, the checkpoint's weights in bf16 on it,
 * {@link CudaModel} for the math and a paged KV cache per sequence. Picks tokens on the device, a
 * JSON-schema request's under its token mask ({@link Sampler#allowed}), which goes to the device with the
 * step: the logits never come back to the host.
 *
 * <p>Failure semantics: opening fails with IllegalStateException when the weights, activations and
 * a minimal cache do not fit the memory budget (memoryFraction of free memory); a sequence whose
 * cache does not fit fails at open. A CUDA error during a step propagates as jcuda.CudaException;
 * the context may then be poisoned and the engine must be closed (executors exit and are replaced).
 * Every entry point makes the context current on the calling thread. Not thread-safe: the engine's
 * lock serialises requests.
 *
 * <p>Prefix reuse (a spec with a prefix cache): every sequence's pages come from one shared
 * {@link KvPagePool} made at open from {@link #POOL_SHARE} of the memory left, each sequence taking its
 * whole capacity when it opens (so running out shows at open, where the engine defers it); a kept
 * prefix holds its full pages by reference and forks share them ({@link PagedKvCache#fork}). Without
 * it each sequence has a private pool, as before.
 */
public final class CudaRunner implements ModelRunner {

  /**
   * Prefill chunks are at least this long on the GPU: shorter ones leave the tensor cores idle; and
   * TSA's default selection chunk (PolicyCatalog, {@code tsa:chunk=4096}) fits the activations, so
   * a default TSA request runs at any --prefill-chunk.
   */
  public static final int MIN_GPU_CHUNK = 4096;

  /**
   * The forward chunk an engine of {@code spec} prefills in (its activations' rows): the spec's, at
   * least {@link #MIN_GPU_CHUNK}. A kept prefix ends on a multiple of it ({@link #prefixCuts}), so a
   * shared part shorter than it reuses nothing (dense, TokenSelect; TSA cuts at its own chunk).
   */
  public static int prefillChunk(EngineSpec spec) {
    return Math.max(spec.prefillChunk(), MIN_GPU_CHUNK);
  }

  private final ModelConfig config;
  private final CudaContext ctx;
  private final KernelModule module;
  private final CudaStream stream;
  private final CudaWeights weights;
  private final CudaModel model;
  private final GpuEnv env;
  private final KvPagePool pool;    // the shared page pool (prefix reuse); null: a private pool per sequence
  private CudaSequence tokenOwner;  // whose last pick the model's device token slot holds (sequences interleave)

  /**
   * Share of the device memory left after weights and activations that the shared page pool takes
   * with prefix reuse on; the rest is for what each sequence allocates besides its pages (page table,
   * logit bias, policy workspaces, decode scratch), which a private pool per sequence would take from
   * the same memory.
   */
  public static final double POOL_SHARE = 0.85;

  private CudaRunner(ModelConfig config, CudaContext ctx, KernelModule module, CudaStream stream, CudaWeights weights,
                     CudaModel model, java.nio.file.Path modelDir, KvPagePool pool) {
    this.pool = pool;
    this.config = config;
    this.ctx = ctx;
    this.module = module;
    this.stream = stream;
    this.weights = weights;
    this.model = model;
    this.env = model.env(modelDir);
  }

  /** Looked up by reflection from {@link CudaAvailability#openRunner}. */
  public static ModelRunner open(EngineSpec spec, LoadedModel loaded) {
    ModelConfig c = loaded.config();
    CudaContext ctx = new CudaContext(spec.gpuOrdinal(), spec.memoryFraction());
    KernelModule module = null;
    CudaStream stream = null;
    CudaWeights weights = null;
    try {
      module = new KernelModule(ctx);
      stream = new CudaStream(ctx);
      Kernels kernels = new Kernels(module, stream, Gemv.forBatch(spec.maxBatch()));
      try (Checkpoint ck = Checkpoint.open(loaded.dir())) {
        // FP8 weights stay FP8 where the FP8 kernels run (sm_90a), else they are dequantized to bf16 on load
        weights = CudaWeights.load(ctx, ck, c, Fp8Kernels.supported(kernels));
      }
      int chunk = prefillChunk(spec);
      CudaModel model = new CudaModel(c, ctx, kernels, weights, chunk);
      KvPagePool pool = null;
      if (spec.prefixCacheBytes() != 0) {
        int context = spec.maxContext() > 0 ? spec.maxContext() : c.maxPositions();
        try {
          pool = new KvPagePool(ctx, c, KvPagePool.sharedPages(c,
              (long) ((ctx.budgetBytes() - ctx.usedBytes()) * POOL_SHARE), spec.maxBatch(), context));
        } catch (RuntimeException | Error e) {
          model.close();
          throw e;
        }
      }
      return new CudaRunner(c, ctx, module, stream, weights, model, loaded.dir(), pool);
    } catch (RuntimeException | Error e) {
      if (weights != null) weights.close();
      if (stream != null) stream.close();
      if (module != null) module.close();
      ctx.close();
      throw e;
    }
  }

  public CudaModel model() {
    return model;
  }

  public CudaContext context() {
    return ctx;
  }

  @Override
  public ModelConfig config() {
    return config;
  }

  @Override
  public String backend() {
    return "cuda";
  }

  @Override
  public String device() {
    return ctx.describe();
  }

  @Override
  public Sequence open(int capacity, PolicySpec p) {
    String why = GpuPolicy.unsupportedReason(p);
    if (why != null) {
      throw new IllegalArgumentException("the CUDA backend does not run " + why + "; use --device cpu (or make it the"
          + " engine's default policy, which device auto then runs on cpu)");
    }
    int fixed = fixedChunk(p);
    ctx.makeCurrent();
    PagedKvCache kv = newCache(capacity);
    try {
      model.reserveDecode(kv.capacity);
      return new CudaSequence(kv, GpuPolicy.open(p, env), p, fixed);
    } catch (RuntimeException | Error e) {
      kv.close();
      throw e;
    }
  }

  /** The chunk policy {@code p} fixes (PolicySpec.prefillChunk), within the activations' rows. */
  private int fixedChunk(PolicySpec p) {
    int fixed = p.prefillChunk();
    if (fixed > model.maxChunk()) throw tooLong("tsa:chunk=" + fixed, fixed);
    return fixed;
  }

  /** A sequence's cache: from the shared pool (its pages reserved now, not mid-prefill) when there is one. */
  private PagedKvCache newCache(int capacity) {
    PagedKvCache kv = pool == null ? new PagedKvCache(ctx, config, capacity) : new PagedKvCache(ctx, config, capacity, pool);
    try {
      kv.reserve(capacity);  // no-op with a private pool
      return kv;
    } catch (RuntimeException | Error e) {
      kv.close();
      throw e;
    }
  }

  /**
   * Prefix reuse cuts: whole prefill chunks (the GEMMs' tiling depends on a chunk's row count, so a
   * prefix ends where a chunk does and the fork's chunks are the ones it runs alone); null (no reuse)
   * without the shared pool.
   */
  @Override
  public PrefixReuse.Cuts prefixCuts() {
    return pool == null ? null : new PrefixReuse.Cuts(model.maxChunk(), false);
  }

  /** A quarter of the shared page pool. */
  @Override
  public long defaultPrefixCacheBytes() {
    return pool == null ? 0 : (long) pool.pages * KvPagePool.pageBytes(config) / 4;
  }

  @Override
  public Sequence openFork(int capacity, PolicySpec p, KeptPrefix prefix) {
    CudaPrefix kept = (CudaPrefix) prefix;
    if (GpuPolicy.unsupportedReason(p) != null) return open(capacity, p); // refuses it as open does
    int fixed = fixedChunk(p); // a TSA fork prefills in its own chunk from a prefix that ends on one (PrefixReuse)
    ctx.makeCurrent();
    PagedKvCache kv = PagedKvCache.fork(ctx, config, capacity, kept.pages(), stream);
    GpuPolicy policy = null;
    try {
      kv.reserve(capacity - kept.tokens());
      model.reserveDecode(kv.capacity);
      policy = GpuPolicy.open(p, env);
      policy.adoptPrefixState(kept.state());
      return new CudaSequence(kv, policy, p, fixed);
    } catch (RuntimeException | Error e) {
      if (policy != null) policy.close();
      kv.close();
      throw e;
    }
  }

  /**
   * One decode step for n sequences, up to {@link CudaModel#MAX_DECODE_BATCH} at a time through
   * the weights together (each weight matrix streamed once per group), attention per sequence with
   * its own cache and policy; picks as {@link Sequence#decodeNext} makes them, one synchronisation
   * per group.
   */
  @Override
  public void decodeBatch(Sequence[] seqs, int[] tokens, int[] positions, float[][] logits, Sampler[] samplers,
                          int[] next, int n) {
    ctx.makeCurrent();
    if (model.ropeDependsOnLength()) {  // each sequence its own RoPE table: one a step
      for (int i = 0; i < n; i++) next[i] = seqs[i].decodeNext(tokens[i], positions[i], logits[i], samplers[i]);
      return;
    }
    int g = CudaModel.MAX_DECODE_BATCH;
    PagedKvCache[] kvs = new PagedKvCache[g];
    GpuPolicy[] policies = new GpuPolicy[g];
    int[] ids = new int[g], pos = new int[g], picked = new int[g];
    double[] temp = new double[g], topP = new double[g], u = new double[g];
    for (int s = 0; s < n; s += g) {
      int m = Math.min(g, n - s);
      if (steppable(seqs, s, m)) {
        decodeStep(seqs, tokens, positions, samplers, s, m, next);
        continue;
      }
      if (m == 1) {
        next[s] = seqs[s].decodeNext(tokens[s], positions[s], logits[s], samplers[s]);
        continue;
      }
      for (int i = 0; i < m; i++) {
        CudaSequence cs = (CudaSequence) seqs[s + i];
        kvs[i] = cs.kv;
        policies[i] = cs.policy;
        ids[i] = tokens[s + i];
        pos[i] = positions[s + i];
      }
      tokenOwner = null;  // the batch overwrites the device token slots
      model.decodeBatch(ids, pos, kvs, policies, m);
      for (int i = 0; i < m; i++) {  // one uniform per top-p pick, in order, as decodeNext draws
        SamplingParams sp = samplers[s + i].params();
        temp[i] = sp.greedy() ? 0 : sp.temperature();
        topP[i] = sp.topP();
        u[i] = sp.greedy() ? 0 : samplers[s + i].uniform();
      }
      long[][] masks = null;
      for (int i = 0; i < m; i++) {
        long[] allowed = samplers[s + i].allowed();
        if (allowed == null) continue;
        if (masks == null) masks = new long[m][];
        masks[i] = allowed;
      }
      model.pickBatch(m, temp, topP, u, masks, picked);
      for (int i = 0; i < m; i++) {
        CudaSequence cs = (CudaSequence) seqs[s + i];
        cs.lastOnDevice = false;
        next[s + i] = picked[i];
      }
    }
  }

  /**
   * Whether sequences s .. s + m - 1 can all go through one {@link CudaModel#decodeStep}: uncompressed
   * caches, each decoding densely or (with graphs on; off, they take the eager reference path)
   * through a policy whose steps can be captured.
   */
  private boolean steppable(Sequence[] seqs, int s, int m) {
    for (int i = s; i < s + m; i++) {
      if (!steppable((CudaSequence) seqs[i])) return false;
    }
    return true;
  }

  private boolean steppable(CudaSequence cs) {
    return CudaModel.denseDecodable(cs.kv)
        && (cs.policy.decodesDense() || model.decodeGraphs() && cs.policy.capturesDecode());
  }

  private final float[] invTemp = new float[CudaModel.MAX_DECODE_BATCH];
  private final float[] topP = new float[CudaModel.MAX_DECODE_BATCH];
  private final float[] uniform = new float[CudaModel.MAX_DECODE_BATCH];
  private final int[] denseIds = new int[CudaModel.MAX_DECODE_BATCH];
  private final int[] densePos = new int[CudaModel.MAX_DECODE_BATCH];
  private final int[] densePicks = new int[CudaModel.MAX_DECODE_BATCH];
  private final PagedKvCache[] denseKvs = new PagedKvCache[CudaModel.MAX_DECODE_BATCH];
  private final GpuPolicy[] stepPolicies = new GpuPolicy[CudaModel.MAX_DECODE_BATCH];
  private final int[] denseBefore = new int[CudaModel.MAX_DECODE_BATCH];
  private final long[][] stepMasks = new long[CudaModel.MAX_DECODE_BATCH][];  // the rows' token masks (null: none)
  // a lone sequence's step through the same call, without arrays made per step
  private final Sequence[] oneSeq = new Sequence[1];
  private final Sampler[] oneSampler = new Sampler[1];
  private final int[] oneToken = new int[1], onePos = new int[1], oneNext = new int[1];

  /**
   * Sequences s .. s + m - 1 through one {@link CudaModel#decodeStep} (a CUDA graph): the uniforms
   * drawn in order, one per top-p pick, as {@link Sequence#decodeNext} draws them, and each dense
   * policy's statistics counted as its dense decode part counts them (a captured policy counts its own).
   */
  private void decodeStep(Sequence[] seqs, int[] tokens, int[] positions, Sampler[] samplers, int s, int m, int[] next) {
    for (int i = 0; i < m; i++) {
      CudaSequence cs = (CudaSequence) seqs[s + i];
      SamplingParams sp = samplers[s + i].params();
      invTemp[i] = sp.greedy() ? 0f : 1f / (float) sp.temperature();
      topP[i] = (float) sp.topP();
      uniform[i] = sp.greedy() ? 0f : (float) samplers[s + i].uniform();
      denseIds[i] = tokens[s + i];
      densePos[i] = positions[s + i];
      denseKvs[i] = cs.kv;
      stepPolicies[i] = cs.policy;
      stepMasks[i] = samplers[s + i].allowed();
    }
    for (int i = 0; i < m; i++) denseBefore[i] = denseKvs[i].length(0);
    tokenOwner = null;  // the step's tokens travel in its plan, not the device token slot
    try {
      model.decodeStep(denseIds, densePos, denseKvs, stepPolicies, invTemp, topP, uniform, stepMasks, m, densePicks);
    } finally {
      java.util.Arrays.fill(stepMasks, null);
    }
    for (int i = 0; i < m; i++) {
      CudaSequence cs = (CudaSequence) seqs[s + i];
      if (cs.policy.decodesDense()) cs.policy.countDenseDecode(denseBefore[i], densePos[i]);
      cs.lastOnDevice = false;
      next[s + i] = densePicks[i];
    }
  }

  @Override
  public void close() {
    ctx.makeCurrent();
    try {
      stream.synchronize();
    } finally {
      if (pool != null) pool.close();
      model.close();
      weights.close();
      stream.close();
      module.close();
      ctx.close();
    }
  }

  /**
   * A chunk a policy fixes (TSA's) beyond the activations, which the engine sizes at start for
   * max(--prefill-chunk, {@link #MIN_GPU_CHUNK}) rows: the GPU's bound on it.
   */
  private IllegalArgumentException tooLong(String what, int rows) {
    return new IllegalArgumentException(what + " exceeds the CUDA engine's prefill chunk of " + model.maxChunk()
        + " tokens (its activations are sized at start): start it with --prefill-chunk " + rows
        + " or more, or use a smaller tsa:chunk (e.g. the default 4096)");
  }

  private final class CudaSequence extends KvSizedSequence {
    private PagedKvCache kv;        // replaced, with the policy, when a LongRoPE sequence is recomputed
    private GpuPolicy policy;
    private final PolicySpec spec;
    private final int[] history;    // (capacity) tokens so far, kept only for a LongRoPE recompute; else null
    private final int fixedChunk;   // the chunk the policy fixes (PolicySpec.prefillChunk): -1 none, 0 the prompt
    private double prefillAttentionMs;  // attention kernels of the prefill, timed with events
    private boolean lastOnDevice;  // this sequence's last pick went to the device token slot
    private int lastPicked = -1;

    CudaSequence(PagedKvCache kv, GpuPolicy policy, PolicySpec spec, int fixedChunk) {
      this.kv = kv;
      this.policy = policy;
      this.spec = spec;
      this.fixedChunk = fixedChunk;
      this.history = config.ropeScaling().type().equals("longrope") ? new int[kv.capacity] : null;
    }

    /** The prompt's chunk: the policy's where it fixes one (0: the whole prompt, which must fit), else the engine's. */
    private int chunk(int promptTokens) {
      if (fixedChunk < 0) return model.maxChunk();
      int c = fixedChunk == 0 ? Math.max(1, promptTokens) : fixedChunk;
      if (c > model.maxChunk()) throw tooLong("tsa:chunk=0 (the whole " + promptTokens + "-token prompt in one chunk)", c);
      return c;
    }

    private void remember(int[] tokens) {
      if (history != null) System.arraycopy(tokens, 0, history, 0, Math.min(tokens.length, history.length));
    }

    /**
     * LongRoPE's first step past its original window: the first {@code length} tokens run again into
     * a fresh cache as one prefill (the long factors for all of them) with a fresh policy, as on
     * the CPU (cpu/CpuRunner) and as transformers' Phi-3 generation means to.
     */
    private boolean recomputed(int token, int pos) {
      if (history != null) history[pos] = token;
      if (!config.ropeScaling().recomputesCacheAt(pos)) return false;
      stream.synchronize();
      policy.close();
      kv.close();  // pages shared with a kept prefix stay with it
      kv = newCache(kv.capacity);
      policy = GpuPolicy.open(spec, env);
      tokenOwner = null;
      model.prefill(java.util.Arrays.copyOf(history, pos + 1), 0, kv, policy, chunk(pos + 1));
      compressMeasured(() -> policy.afterPrefill(kv));
      lastOnDevice = false;
      return true;
    }

    @Override
    public void prefill(int[] tokens, float[] logits) {
      ctx.makeCurrent();
      try (CudaModel.Profile p = new CudaModel.Profile()) {
        model.profile(p);
        tokenOwner = null;  // the prefill overwrote the device token slot
        remember(tokens);
        model.prefill(tokens, 0, kv, policy, chunk(tokens.length));
        model.profile(null);
        compressMeasured(() -> policy.afterPrefill(kv));
        model.readLogits(logits);
        prefillAttentionMs += p.millis()[CudaModel.Profile.ATTENTION];
      } finally {
        model.profile(null);
      }
      lastOnDevice = false;
    }

    @Override
    public void decode(int token, int pos, float[] logits) {
      ctx.makeCurrent();
      if (recomputed(token, pos)) {
        model.readLogits(logits);
        return;
      }
      tokenOwner = null;
      model.decode(token, false, pos, kv, policy);
      model.readLogits(logits);
      lastOnDevice = false;
    }

    @Override
    public int prefillNext(int[] tokens, float[] logits, Sampler sampler) {
      ctx.makeCurrent();
      try (CudaModel.Profile p = new CudaModel.Profile()) {
        model.profile(p);
        tokenOwner = null;
        remember(tokens);
        model.prefill(tokens, 0, kv, policy, chunk(tokens.length));
        model.profile(null);
        compressMeasured(() -> policy.afterPrefill(kv));
        int next = pick(sampler);  // synchronises: the events below are complete
        prefillAttentionMs += p.millis()[CudaModel.Profile.ATTENTION];
        return next;
      } finally {
        model.profile(null);
      }
    }

    /**
     * Prompt tokens [from, to) at their positions: a prefix reuse part (the one that ends at a kept
     * prefix, or a fork's rest). The whole prompt in one part is {@link #prefillNext}.
     */
    @Override
    public int prefillPart(int[] tokens, int from, int to, float[] logits, Sampler sampler) {
      if (from == 0 && to == tokens.length) return prefillNext(tokens, logits, sampler);
      ctx.makeCurrent();
      boolean last = to == tokens.length;
      try (CudaModel.Profile p = new CudaModel.Profile()) {
        model.profile(p);
        tokenOwner = null;
        // the policy's chunk (TSA's: a kept prefix ends on one) and the whole prompt's RoPE table, as alone
        model.prefill(Arrays.copyOfRange(tokens, from, to), from, kv, policy, chunk(tokens.length), tokens.length);
        model.profile(null);
        int next = -1;
        if (last) {
          remember(tokens);  // a fork's too: a LongRoPE recompute runs the kept prefix's tokens again
          compressMeasured(() -> policy.afterPrefill(kv));
          next = pick(sampler);
        } else {
          lastOnDevice = false;
        }
        prefillAttentionMs += p.millis()[CudaModel.Profile.ATTENTION];
        return next;
      } finally {
        model.profile(null);
      }
    }

    @Override
    public KeptPrefix keepPrefix(int tokens) {
      ctx.makeCurrent();
      KeptPages pages = kv.keep(tokens, stream);
      try {
        return new CudaPrefix(ctx, pages, policy.keepPrefixState());
      } catch (RuntimeException | Error e) {
        pages.close();
        throw e;
      }
    }

    @Override
    public int decodeNext(int token, int pos, float[] logits, Sampler sampler) {
      ctx.makeCurrent();
      if (recomputed(token, pos)) return pick(sampler);
      if (steppable(this)) {
        oneSeq[0] = this;
        oneToken[0] = token;
        onePos[0] = pos;
        oneSampler[0] = sampler;
        decodeStep(oneSeq, oneToken, onePos, oneSampler, 0, 1, oneNext);
        lastPicked = oneNext[0];
        return lastPicked;
      }
      // the batching engine interleaves sequences: the slot holds our token only if no other sequence picked since
      model.decode(token, tokenOwner == this && lastOnDevice && token == lastPicked, pos, kv, policy);
      return pick(sampler);
    }

    private int pick(Sampler sampler) {
      SamplingParams sp = sampler.params();
      if (sp.greedy()) model.sample(0, 1, 0, sampler.allowed());
      else model.sample((float) sp.temperature(), (float) sp.topP(), (float) sampler.uniform(), sampler.allowed());
      lastPicked = model.readToken();
      lastOnDevice = true;
      tokenOwner = this;
      return lastPicked;
    }

    @Override
    public long kvBytes() {
      return kv.bf16Bytes();
    }

    /**
     * Attention time of the prefill (events around each layer's attention kernels). Decode steps
     * are not timed: events around hundreds of microsecond-long launches per step would cost more
     * host time than they measure; `bench` splits decode time by kernel instead.
     */
    @Override
    public double attentionMs() {
      return prefillAttentionMs;
    }

    @Override
    public PolicyStats policyStats() {
      ctx.makeCurrent();
      return policy.stats();
    }

    @Override
    public String policyResolved() {
      return policy.describe();
    }

    @Override
    public void close() {
      ctx.makeCurrent();
      stream.synchronize();
      policy.close();
      kv.close();
    }
  }
}
