package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.PolicyStats;

/**
 * How one request attends, on the CPU reference backend. The forward pass calls exactly these
 * three hooks and nothing else differs between dense and sparse runs: prefill attention per layer
 * and chunk, an optional rewrite of the cache once the prompt is in (KV compression), and decode
 * attention per layer and step. A policy object belongs to one request and may keep state across
 * steps (Selection Cache, statistics); it is not thread-safe.
 */
public interface AttentionPolicy {

  /** Canonical name with parameters, recorded in the stats. */
  String describe();

  /**
   * Attention of n queries at positions pos0 .. pos0+n-1 whose keys and values are already appended.
   *
   * @param q   (n, nHeads * headDim) queries before RoPE
   * @param out (n, nHeads * headDim) attention output, every element written
   */
  void prefill(int layer, float[] q, int n, int pos0, KvCache kv, float[] out, AttentionContext ctx);

  /** Called once after the whole prompt is cached and before the first decode step. */
  default void afterPrefill(KvCache kv, AttentionContext ctx) {}

  /**
   * Attention of one query at position pos (its key and value already appended).
   *
   * @param q   (nHeads * headDim) query before RoPE
   * @param out (nHeads * headDim) attention output
   */
  void decode(int layer, float[] q, int pos, KvCache kv, float[] out, AttentionContext ctx);

  /** Selection statistics gathered so far. */
  default PolicyStats stats() {
    return PolicyStats.DENSE;
  }
}
