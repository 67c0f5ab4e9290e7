package io.longsieve.cuda.policy;

import io.longsieve.cuda.kv.PagedKvCache;
/**
 * The three places a policy plugs into a request on the GPU, as cpu/policy/ComposedPolicy's parts
 * on the CPU: prefill attention per layer and chunk, KV compression once after the prompt, decode
 * attention per layer and step. A part belongs to one sequence, keeps its device buffers until
 * {@code close} and queues all work on the engine's stream (no host synchronisation unless its
 * Javadoc says so). Selection statistics go to the SelectionStats it was built with; counters
 * that live on the device are folded in by {@code collect}.
 */
public final class GpuParts {
  private GpuParts() {}

  interface Part extends AutoCloseable {
    /** Folds device-side counters into the stats (may synchronise); called before a snapshot. */
    default void collect() {}

    @Override
    default void close() {}
  }

  interface Prefill extends Part {
    void prefill(LayerCall c);
  }

  public interface Kv extends Part {
    /** Sees every prefill chunk before its attention (to record the queries it will score with). */
    default void observe(LayerCall c) {}

    /** Rewrites the cache once after the prompt (may change lengths, set logit biases). */
    void compress(PagedKvCache kv);

    /** After a decode step's attention in this layer; true when it rewrote the cache (eviction). */
    default boolean afterDecode(LayerCall c, PagedKvCache kv) {
      return false;
    }
  }

  interface Decode extends Part {
    void decode(LayerCall c);

    /** The cache was rewritten (compression): forget anything keyed by slot. */
    default void reset() {}
  }
}
