package io.longsieve.cuda.policy;

import io.longsieve.cuda.kv.PagedKvCache;
import jcuda.driver.CUdeviceptr;

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

  /**
   * What a part carries from the prefill of a kept prompt prefix to the forks that start from it
   * (io.longsieve.policy.PrefixReuse says which parts have any): device copies, freed on close.
   */
  public interface KeptState extends AutoCloseable {
    long bytes();

    @Override
    void close();
  }

  interface Prefill extends Part {
    void prefill(LayerCall c);

    /** This part's state after the prefill of a kept prefix (queued copies); null: none the next call reads. */
    default KeptState keepState() {
      return null;
    }

    /** Takes what {@link #keepState} kept, in a fresh part of a fork (queued copies). */
    default void adoptState(KeptState state) {}
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

  /**
   * A decode part whose steps a CUDA graph can replay (cuda/DecodeStep): the host's decisions of a
   * step, taken once for every layer, split from the launches, which read the sizes that move from
   * step to step (one more slot each) from the step's plan in device memory. The launches of two
   * steps with the same shape version differ only in those sizes, so a graph captured from one
   * replays the other. Failure semantics as {@link #decode}; the plan may synchronise where a buffer
   * grows (which makes a new version).
   */
  interface CapturedDecode extends Decode {
    /**
     * The host half of one decode step of every layer: the query at real position pos sees end slots
     * (its own, appended by the step, included) of the uniform-length cache kv. Takes the decisions
     * {@link #decode} would take, counts the statistics, grows buffers, queues now what a replayed
     * step must not repeat, writes the step's moving sizes at sizes[at ..] and returns the shape
     * version: the same number as the last step's when the launches are the same.
     */
    long planStep(PagedKvCache kv, int end, int pos, int[] sizes, int at);

    /**
     * Whether the planned step attends densely in this layer: then the model attends the row as it
     * attends dense rows (its DecodeRow, the shared workspace) and {@link #launchStep} is not called.
     */
    boolean stepAttendsDense(int layer);

    /**
     * One selecting layer's launches of the planned step (not {@link #stepAttendsDense}): the moving
     * sizes from step (device), c's pointers; c's positions and lengths are those of the step that
     * was captured.
     */
    void launchStep(LayerCall c, CUdeviceptr step);
  }
}
