package io.longsieve.policy;

import io.longsieve.model.ModelConfig;
import io.longsieve.model.RopeScaling;

/**
 * What a request may take from the kept KV cache of a prompt prefix it shares with other requests
 * (prefix reuse, docs/prefix-reuse.md), per policy: the one place the rule lives, so both backends
 * and the documentation agree. Reuse must be exact: a request that starts from a kept prefix of L
 * tokens computes, token for token, what it computes alone. So the prefix must hold what the prefill
 * leaves after L tokens whatever follows them, and the request's own prefill of [L, n) must run the
 * same calls it runs alone:
 * <ul>
 *   <li>{@code dense} prefill: the KV of [0, L) depends on those tokens only. On a backend whose
 *       dense prefill computes each token the same wherever the prompt is cut into chunks (the CPU),
 *       any L; else (the GPU, whose GEMM tiling depends on the chunk's row count) L is a multiple of
 *       the forward chunk, so the request's chunks are the ones it runs alone.</li>
 *   <li>{@code tokenselect} prefill: selection runs per sub-chunk inside each forward chunk and the
 *       Selection Cache carries from one call to the next, so L is a multiple of the forward chunk and
 *       the kept prefix carries the Selection Cache as it stood at L.</li>
 *   <li>{@code tsa} prefill: selection runs once per TSA chunk ({@code tsa:chunk}, which both backends
 *       also prefill in, whatever the engine's or a request's chunk), so L is a multiple of it;
 *       {@code tsa:chunk=0} selects once over the whole prompt, so it reuses nothing.</li>
 *   <li>KV compression reads the prefill's queries: {@code snapkv} and {@code selkv} only the last
 *       {@code window} of them, so L ≤ n − window (their window lies in the request's own part);
 *       {@code h2o} every query's attention, which over [0, L) depends on the prefix only, so the
 *       kept prefix carries its accumulated scores; {@code streaming} eviction reads none. Each
 *       request then compresses its own copy of the cache after its own part.</li>
 *   <li>Decode policies start after the prefill: nothing to decide (TokenSelect's Selection Cache,
 *       when one object serves prefill and decode, is carried as above).</li>
 * </ul>
 * Every request prefills at least its last prompt token itself (its logits pick the first new token).
 *
 * <p>RoPE whose table follows the prefill call's length (dynamic NTK, LongRoPE: Rope#atLength) makes
 * the prefix's KV depend on the whole prompt's length, so such requests share a prefix only with
 * prompts whose length selects the same table ({@link #stateKey(PolicySpec, Cuts, ModelConfig, int)}).
 * A LongRoPE fork that decodes past the original window is recomputed from its tokens as it is alone.
 */
public final class PrefixReuse {
  private PrefixReuse() {}

  /**
   * How a backend cuts a prefill into forward chunks, as a request's reuse depends on it.
   *
   * @param forwardChunk    prompt tokens per forward chunk, counted from the start of each prefill call
   * @param denseCutAnywhere whether dense prefill computes every token the same wherever a chunk starts
   */
  public record Cuts(int forwardChunk, boolean denseCutAnywhere) {
    public Cuts {
      if (forwardChunk < 1) throw new IllegalArgumentException("forwardChunk must be >= 1, not " + forwardChunk);
    }
  }

  /**
   * The prompt tokens a request under {@code policy} may take from a kept prefix: at most
   * {@code shared} (what the caller says it shares with other requests), 0 when none.
   *
   * @param promptTokens the request's prompt length
   */
  public static int reusableTokens(PolicySpec policy, int shared, int promptTokens, Cuts cuts) {
    long l = Math.min((long) shared, promptTokens - 1L);
    String kv = policy.kv().name();
    if (kv.equals("snapkv") || kv.equals("selkv")) l = Math.min(l, promptTokens - (long) policy.kv().intParam("window"));
    long unit = cutUnit(policy, cuts);
    l = l / unit * unit;
    return (int) Math.max(0, l);
  }

  /**
   * Requests may share a kept prefix only when this is equal (and so are the prefix's token ids): the
   * prefill policy with its parameters, the forward chunk where it decides the cut, and the KV policy
   * when the kept prefix carries its state (H2O's scores).
   */
  public static String stateKey(PolicySpec policy, Cuts cuts) {
    String key = policy.prefill().canonical();
    if (forwardChunkDecides(policy, cuts)) key += " | chunk=" + cuts.forwardChunk();
    if (policy.kv().name().equals("h2o")) key += " | h2o";
    return key;
  }

  /**
   * {@link #stateKey(PolicySpec, Cuts)} for a prompt of {@code promptTokens} on {@code config}'s model:
   * with a length-dependent RoPE, also the table each such layer kind prefills with.
   */
  public static String stateKey(PolicySpec policy, Cuts cuts, ModelConfig config, int promptTokens) {
    StringBuilder key = new StringBuilder(stateKey(policy, cuts));
    java.util.Set<RopeScaling> seen = new java.util.HashSet<>();
    for (int l = 0; l < config.numLayers(); l++) {
      RopeScaling s = config.layerKind(l).ropeScaling();
      if (s.dependsOnLength() && seen.add(s)) key.append(" | rope=").append(s.tableAt(promptTokens, config.maxPositions()));
    }
    return key.toString();
  }

  /** Whether where the backend cuts its forward chunks moves where the prefix may end. */
  private static boolean forwardChunkDecides(PolicySpec policy, Cuts cuts) {
    return switch (policy.prefill().name()) {
      case "dense" -> !cuts.denseCutAnywhere();
      case "tokenselect" -> true;
      default -> false; // tsa: its own chunk, in its canonical parameters
    };
  }

  /** The tokens a reused prefix's length must be a multiple of; {@link Long#MAX_VALUE}: none may be reused. */
  static long cutUnit(PolicySpec policy, Cuts cuts) {
    return switch (policy.prefill().name()) {
      case "dense" -> cuts.denseCutAnywhere() ? 1 : cuts.forwardChunk();
      case "tokenselect" -> cuts.forwardChunk();
      case "tsa" -> tsaSelectionChunk(policy);
      default -> throw new IllegalStateException("not a prefill policy: " + policy.prefill().name());
    };
  }

  /**
   * The tokens one TSA selection covers: its fixed chunk ({@link PolicySpec#prefillChunk}), which is
   * also the forward chunk both backends run it in (so the engine's chunk plays no part); 0, the whole
   * prompt in one selection, depends on every prompt token: no prefix may be reused.
   */
  static long tsaSelectionChunk(PolicySpec tsa) {
    int chunk = tsa.prefillChunk();
    return chunk > 0 ? chunk : Long.MAX_VALUE;
  }
}
