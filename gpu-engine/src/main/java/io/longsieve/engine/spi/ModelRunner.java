package io.longsieve.engine.spi;

import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import io.longsieve.policy.PrefixReuse;

/**
 * A backend's forward pass: the CPU reference or the CUDA engine. The generation logic
 * ({@link GenerationTask}) is shared; a backend only turns tokens into logits, per sequence or for
 * a batch of sequences' decode steps ({@link #decodeBatch}). Only one thread calls a runner at a
 * time (the engine's scheduler).
 */
public interface ModelRunner extends AutoCloseable {

  ModelConfig config();

  /** "cpu" or "cuda". */
  String backend();

  /** Human-readable device, e.g. "cpu:2 threads" or "cuda:0 NVIDIA H200". */
  String device();

  /**
   * Starts a sequence with room for {@code capacity} tokens whose attention follows {@code policy}.
   * Close it when done.
   *
   * @throws IllegalArgumentException when this backend does not run the policy
   *     ({@link PolicySpec#unsupportedReason})
   */
  Sequence open(int capacity, PolicySpec policy);

  /**
   * KV cache bytes one token slot of one sequence reserves, all layers together; the batching
   * engine's memory budget counts admitted sequences in these. Default: bf16 keys and values.
   */
  default long kvBytesPerSlot() {
    ModelConfig c = config();
    return 2L * c.numLayers() * c.kvDim() * 2;
  }

  /** The KV budget when the engine spec sets none. Default: no engine-side bound. */
  default long defaultKvBudgetBytes() {
    return Long.MAX_VALUE;
  }

  /**
   * One decode step for each of {@code n} sequences opened by this runner: sequence i runs
   * {@code tokens[i]} at {@code positions[i]} and its next token, drawn as
   * {@link Sequence#decodeNext} draws it with {@code samplers[i]}, goes to {@code next[i]};
   * {@code logits[i]} (vocab) is its scratch. An exception fails the whole step: the sequences'
   * caches are then in an unknown state and the caller must give them all up.
   * Default: one {@link Sequence#decodeNext} after the other (the CUDA backend); the CPU backend
   * runs the rows through the weights together.
   */
  default void decodeBatch(Sequence[] seqs, int[] tokens, int[] positions, float[][] logits, Sampler[] samplers,
                           int[] next, int n) {
    for (int i = 0; i < n; i++) next[i] = seqs[i].decodeNext(tokens[i], positions[i], logits[i], samplers[i]);
  }

  /**
   * How this runner cuts a prefill into forward chunks, read on the thread that will prefill (it may
   * honour {@link RequestLimits#prefillChunk}), which decides where a kept prefix may end
   * ({@link PrefixReuse}). Null (the default): this runner keeps no prefixes, {@link Sequence#keepPrefix}
   * and {@link #openFork} are unsupported.
   */
  default PrefixReuse.Cuts prefixCuts() {
    return null;
  }

  /** Bytes kept prefixes may hold together when the engine spec names no budget. Default: none. */
  default long defaultPrefixCacheBytes() {
    return 0;
  }

  /**
   * Opens a sequence as {@link #open} does whose first {@code prefix.tokens()} prompt tokens are the
   * kept prefix's: the cache slots and the policy's state as the kept sequence had them
   * ({@link Sequence#keepPrefix}). Its prefill goes on with {@link Sequence#prefillPart} from
   * {@code prefix.tokens()}; what it computes is what the same prompt computes alone. The prefix stays
   * the caller's: closing it later does not touch the fork.
   *
   * @throws UnsupportedOperationException when {@link #prefixCuts} is null
   */
  default Sequence openFork(int capacity, PolicySpec policy, KeptPrefix prefix) {
    throw new UnsupportedOperationException(backend() + " keeps no prefixes");
  }

  @Override
  void close();

  /**
   * The KV cache of a prompt prefix and its policy state, kept after the sequence that computed it
   * ({@link Sequence#keepPrefix}) for forks ({@link #openFork}). Closed by whoever kept it, on the
   * thread that drives the runner.
   */
  interface KeptPrefix extends AutoCloseable {
    /** Prompt tokens it holds. */
    int tokens();

    /** Memory it holds (host or device), what a cache of kept prefixes budgets. */
    long bytes();

    @Override
    void close();
  }

  /** One request's state on the backend: its KV cache and its policy. */
  interface Sequence extends AutoCloseable {
    /** Runs the prompt (chunked inside) and writes the logits of its last token (vocab). */
    void prefill(int[] tokens, float[] logits);

    /** Runs one token at position {@code pos} and writes its logits (vocab). */
    void decode(int token, int pos, float[] logits);

    /**
     * Prefill, then the first new token. Backends that sample on the device override this (and
     * {@link #decodeNext}) so a step returns only the token id; {@code logits} may then be left
     * unwritten. Greedy picks equal {@link Sampler#argmax}; top-p draws one {@link Sampler#uniform()}.
     */
    default int prefillNext(int[] tokens, float[] logits, Sampler sampler) {
      prefill(tokens, logits);
      return sampler.next(logits, logits.length);
    }

    /**
     * The most prompt tokens one {@link #prefillPart} call should run, read on the thread that
     * will call it (it may honour {@link RequestLimits#prefillChunk}). Default:
     * {@code Integer.MAX_VALUE}, the whole prompt in one call.
     */
    default int prefillPartTokens() {
      return Integer.MAX_VALUE;
    }

    /**
     * Runs prompt tokens [from, to) at their own positions, continuing the prefill of earlier
     * calls (parts come in order, from 0). The call that reaches {@code tokens.length} ends the
     * prefill (the policy's compression) and returns the first new token as {@link #prefillNext}
     * does; earlier calls return -1. Split as {@link #prefillPartTokens} says, the parts compute
     * exactly what one {@link #prefillNext} computes.
     *
     * @throws IllegalArgumentException when the default (one part only) gets anything but the whole prompt
     */
    default int prefillPart(int[] tokens, int from, int to, float[] logits, Sampler sampler) {
      if (from != 0 || to != tokens.length) {
        throw new IllegalArgumentException("this backend prefills the whole prompt in one part");
      }
      return prefillNext(tokens, logits, sampler);
    }

    /** Decode of {@code token} at {@code pos}, then the next token (see {@link #prefillNext}). */
    default int decodeNext(int token, int pos, float[] logits, Sampler sampler) {
      decode(token, pos, logits);
      return sampler.next(logits, logits.length);
    }

    /**
     * Evaluation only ({@code Engine.drive}): from the next call on, measures attention recall
     * ({@link AttentionRecall}) at the query positions {@code positions} (ascending) in every layer and
     * query head; {@link #attentionRecall} reads it. Costs a second, never compressed copy of the KV cache
     * and one dense score row per probed query and head; runs that never call it pay nothing.
     *
     * @throws UnsupportedOperationException (a one-line reason) where the backend cannot say which keys
     *     its policies attended
     */
    default void recordAttention(int[] positions) {
      throw new UnsupportedOperationException("attention recall is measured on the CPU backend only");
    }

    /** What {@link #recordAttention} measured so far; null when it was not called. */
    default AttentionRecall attentionRecall() {
      return null;
    }

    /** KV cache bytes (bf16 equivalent) right after prefill, before any compression. */
    long kvBytesBeforeCompression();

    /** KV cache bytes now. */
    long kvBytes();

    /** KV cache bytes right after the policy's compression (equal to before when none ran), before decode grows it. */
    default long kvBytesAfterCompression() {
      return kvBytes();
    }

    /**
     * Attention time in ms so far (selection included). The engine reads it when the prefill ends,
     * so what a backend adds during decode steps never reaches the stats.
     */
    double attentionMs();

    PolicyStats policyStats();

    /**
     * The policy as this sequence resolved it for the stats' {@code policy_resolved}: the canonical
     * form with what the model folder decided filled in ({@link PolicySpec#resolved}).
     */
    String policyResolved();

    /**
     * Keeps this sequence's first {@code tokens} prompt tokens for forks ({@link #openFork}): called
     * between prefill parts when exactly that many are cached, before any compression. What is kept
     * does not change when this sequence goes on or closes.
     *
     * @throws UnsupportedOperationException when the runner keeps no prefixes
     * @throws IllegalStateException         when the cache does not hold exactly {@code tokens} slots
     */
    default KeptPrefix keepPrefix(int tokens) {
      throw new UnsupportedOperationException("this backend keeps no prefixes");
    }

    @Override
    void close();
  }
}
