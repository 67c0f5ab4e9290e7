package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.LayerList;
import io.longsieve.policy.PolicyCatalog.Backend;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import io.longsieve.policy.SelectionStats;
import java.nio.file.Path;

/**
 * A request's policy on the CPU: one part per slot of its {@link PolicySpec}. Prefill chunks go to
 * the prefill part (and are shown to the KV part, which may record the queries it scores with),
 * the KV part rewrites the cache once after the prompt, decode steps go to the decode part. Parts
 * are built on the first call, when the model's shapes are known. Not thread-safe: one request.
 *
 * <p>Sliding-window layers (Gemma 3's local layers; every layer of a model whose config slides them
 * all, as Mistral v0.1's): every policy attends densely within the window there, prefill and decode,
 * and KV compression leaves such a layer whole (the compressors skip it, H2O never observes it). A
 * window of a few thousand tokens is already the sparse part of those models, and selecting inside
 * it would drop what the model was trained to see. docs/models.md lists this per policy.
 *
 * <p>The CPU backend's one policy factory ({@link #of}): which names it runs comes from
 * {@link io.longsieve.policy.PolicyCatalog}'s backends column.
 */
public final class ComposedPolicy implements AttentionPolicy {

  /**
   * What a part carries from the prefill of a kept prompt prefix to the forks that start from it
   * (io.longsieve.policy.PrefixReuse says which parts have any): a copy, never shared.
   */
  interface KeptState {
    long bytes();
  }

  /** Prefill attention of a chunk; same contract as {@link AttentionPolicy#prefill}. */
  interface Prefill {
    void prefill(int layer, float[] q, int n, int pos0, KvCache kv, float[] out, AttentionContext ctx);

    /** This part's state after the prefill of a kept prefix; null: it has none the next call reads. */
    default KeptState keepState(int tokens) {
      return null;
    }

    /** Takes what {@link #keepState} kept, in a fresh part of a fork whose cache is kv. */
    default void adoptState(KeptState state, KvCache kv) {}
  }

  /** KV compression: sees every prefill chunk's queries, then rewrites the cache once. */
  interface Kv {
    default void observe(int layer, float[] q, int n, int pos0, KvCache kv, AttentionContext ctx) {}

    /** As {@link Prefill#keepState}: what this part gathered over the prefix's queries, if it needs it later. */
    default KeptState keepState(int tokens) {
      return null;
    }

    /** As {@link Prefill#adoptState}. */
    default void adoptState(KeptState state, KvCache kv) {}

    void compress(KvCache kv, AttentionContext ctx);

    /** After a decode step's attention in this layer; returns true when it rewrote the cache (eviction). */
    default boolean afterDecode(int layer, float[] q, int pos, KvCache kv, AttentionContext ctx) {
      return false;
    }
  }

  /** Decode attention of one step; same contract as {@link AttentionPolicy#decode}. */
  interface Decode {
    void decode(int layer, float[] q, int pos, KvCache kv, float[] out, AttentionContext ctx);

    /** The cache was rewritten (compression): forget anything keyed by slot. */
    default void reset() {}
  }

  private final PolicySpec spec;
  private final Path modelDir;
  private SelectionStats stats;
  private Prefill prefill;
  private Kv kvPart;       // null: no compression
  private Decode decode;
  private Prefill windowed;       // sliding-window layers' prefill and decode: dense within the window
  private Decode windowedDecode;
  private String described;

  /**
   * A fresh CPU policy object for one request.
   *
   * @param modelDir the checkpoint folder, where {@code layers=auto} finds the sparse-layer profile; may
   *     be null (the default layers)
   * @throws IllegalArgumentException when the catalog says the CPU does not run a slot of {@code spec}
   */
  public static ComposedPolicy of(PolicySpec spec, Path modelDir) {
    String why = spec.unsupportedReason(Backend.CPU);
    if (why != null) throw new IllegalArgumentException("the CPU backend does not run " + why + " (of '" + spec + "')");
    return new ComposedPolicy(spec, modelDir);
  }

  /** {@link #of} with no model folder (TSA's {@code layers=auto} uses its default). */
  public static ComposedPolicy of(PolicySpec spec) {
    return of(spec, null);
  }

  private ComposedPolicy(PolicySpec spec, Path modelDir) {
    this.spec = spec;
    this.modelDir = modelDir;
    this.described = spec.canonical();
  }

  private void init(AttentionContext ctx) {
    if (stats != null) return;
    stats = new SelectionStats(ctx.config().numLayers());
    windowed = new DenseParts.Prefill(stats);
    windowedDecode = new DenseParts.Decode(stats);
    TokenSelect tsPrefill = null;
    switch (spec.prefill().name()) {
      case "dense": prefill = new DenseParts.Prefill(stats); break;
      case "tokenselect": prefill = tsPrefill = new TokenSelect(spec.prefill(), stats, ctx); break;
      case "tsa": {
        TokenSparseAttention t = new TokenSparseAttention(spec.prefill(), stats, ctx, modelDir);
        prefill = t;
        described = spec.resolved(LayerList.describe(spec.prefill().text("layers"), t.layerList(), modelDir));
        break;
      }
      case "oracle": prefill = new OracleSelection(spec.prefill(), stats, ctx); break;
      default: throw new IllegalStateException("not a prefill policy: " + spec.prefill().name());
    }
    switch (spec.kv().name()) {
      case "none": kvPart = null; break;
      case "selkv": kvPart = new SelKv(spec.kv(), ctx); break;
      case "snapkv": kvPart = new SnapKv(spec.kv(), ctx); break;
      case "h2o": kvPart = new H2o(spec.kv(), ctx); break;
      case "streaming": kvPart = new StreamingLlm.Eviction(spec.kv()); break;
      default: throw new IllegalStateException("not a kv policy: " + spec.kv().name());
    }
    switch (spec.decode().name()) {
      case "dense": decode = new DenseParts.Decode(stats); break;
      case "tokenselect":
        decode = spec.sharesTokenSelect() ? tsPrefill : new TokenSelect(spec.decode(), stats, ctx);
        break;
      case "quest": decode = new Quest(spec.decode(), stats, ctx); break;
      case "streaming": decode = new StreamingLlm.Window(spec.decode(), stats, ctx); break;
      case "oracle": decode = new OracleSelection(spec.decode(), stats, ctx); break; // stateless: no sharing needed
      default: throw new IllegalStateException("not a decode policy: " + spec.decode().name());
    }
  }

  @Override
  public String describe() {
    return described;
  }

  @Override
  public void prefill(int layer, float[] q, int n, int pos0, KvCache kv, float[] out, AttentionContext ctx) {
    init(ctx);
    if (ctx.window() > 0) {  // a sliding-window layer: dense within its window, whatever the policy
      windowed.prefill(layer, q, n, pos0, kv, out, ctx);
      return;
    }
    // observing the prefill's attention is attention work (inside attention_ms, as on the GPU), not selection
    if (kvPart != null) kvPart.observe(layer, q, n, pos0, kv, ctx);
    prefill.prefill(layer, q, n, pos0, kv, out, ctx);
  }

  @Override
  public void afterPrefill(KvCache kv, AttentionContext ctx) {
    init(ctx);
    if (kvPart == null) return;
    kvPart.compress(kv, ctx); // in prefill_ms, neither attention nor selection (the GPU's events agree)
    stats.kvBytesAfter = kv.bf16Bytes();
    decode.reset();
  }

  @Override
  public void decode(int layer, float[] q, int pos, KvCache kv, float[] out, AttentionContext ctx) {
    init(ctx);
    if (ctx.window() > 0) {
      windowedDecode.decode(layer, q, pos, kv, out, ctx);
      return;
    }
    decode.decode(layer, q, pos, kv, out, ctx);
    if (kvPart != null) {
      long t = System.nanoTime();
      if (kvPart.afterDecode(layer, q, pos, kv, ctx)) decode.reset();
      stats.selectionNanos += System.nanoTime() - t;
    }
  }

  /**
   * The parts' state after the prefill of a kept prompt prefix of {@code tokens} tokens (prefix
   * reuse), for {@link #adoptPrefixState} in the forks: a copy, independent of this policy from now on.
   * Statistics are not kept: a fork's count the work it runs itself.
   */
  public PrefixState keepPrefixState(int tokens, AttentionContext ctx) {
    init(ctx);
    return new PrefixState(prefill.keepState(tokens), kvPart == null ? null : kvPart.keepState(tokens));
  }

  /**
   * Starts this (fresh) policy from a kept prefix's state; kv is the fork's cache, which holds the
   * prefix. The prefix was kept under the same prefill policy (PrefixReuse.stateKey), so the parts match.
   */
  public void adoptPrefixState(PrefixState state, KvCache kv, AttentionContext ctx) {
    init(ctx);
    if (state.prefill() != null) prefill.adoptState(state.prefill(), kv);
    if (state.kv() != null) kvPart.adoptState(state.kv(), kv);
  }

  /** What {@link #keepPrefixState} keeps: each part's own state, null where it has none. */
  public record PrefixState(KeptState prefill, KeptState kv) {
    public long bytes() {
      return (prefill == null ? 0 : prefill.bytes()) + (kv == null ? 0 : kv.bytes());
    }
  }

  @Override
  public PolicyStats stats() {
    return stats == null ? PolicyStats.DENSE : stats.snapshot();
  }
}
