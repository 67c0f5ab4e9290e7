package io.longsieve.engine;

import io.longsieve.attention.PolicyStats;
import io.longsieve.model.ModelConfig;

/**
 * A backend's forward pass, one sequence at a time: the CPU reference or the CUDA engine. The
 * generation loop ({@link Generator}) is shared; a backend only turns tokens into logits.
 */
public interface ModelRunner extends AutoCloseable {

  ModelConfig config();

  /** "cpu" or "cuda". */
  String backend();

  /** Human-readable device, e.g. "cpu:2 threads" or "cuda:0 NVIDIA H200". */
  String device();

  /**
   * Starts a sequence with room for {@code capacity} tokens whose attention follows {@code policy}
   * (already validated by {@link io.longsieve.attention.PolicySpec#parse}). Close it when done.
   */
  Sequence open(int capacity, String policy);

  @Override
  void close();

  /** One request's state on the backend: its KV cache and its policy. */
  interface Sequence extends AutoCloseable {
    /** Runs the prompt (chunked inside) and writes the logits of its last token (vocab). */
    void prefill(int[] tokens, float[] logits);

    /** Runs one token at position {@code pos} and writes its logits (vocab). */
    void decode(int token, int pos, float[] logits);

    /** KV cache bytes (bf16 equivalent) right after prefill, before any compression. */
    long kvBytesBeforeCompression();

    /** KV cache bytes now. */
    long kvBytes();

    /** KV cache bytes right after the policy's compression (equal to before when none ran), before decode grows it. */
    default long kvBytesAfterCompression() {
      return kvBytes();
    }

    /** Attention time in ms so far (selection included). */
    double attentionMs();

    PolicyStats policyStats();

    /** Canonical policy description for the stats. */
    String policy();

    @Override
    void close();
  }
}
