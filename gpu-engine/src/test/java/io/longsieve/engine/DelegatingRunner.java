package io.longsieve.engine;

import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;
import io.longsieve.policy.PrefixReuse;

/**
 * A runner that passes every call on to {@code inner}, for test runners that change one or two of
 * them: a subclass overrides {@link #open} and returns a {@link DelegatingSequence} with its own
 * overrides. Failures are inner's, passed on as they are.
 *
 * <p>{@link #decodeBatch}, {@link #kvBytesPerSlot} and {@link #defaultKvBudgetBytes} stay the
 * interface's defaults, not inner's: inner's batched decode would be handed sequences it did not open,
 * and the default runs each step through the wrapped sequence (the CUDA backend's path), which is
 * what the subclasses count or change.
 */
abstract class DelegatingRunner implements ModelRunner {

  final ModelRunner inner;

  DelegatingRunner(ModelRunner inner) {
    this.inner = inner;
  }

  @Override
  public ModelConfig config() {
    return inner.config();
  }

  @Override
  public String backend() {
    return inner.backend();
  }

  @Override
  public String device() {
    return inner.device();
  }

  @Override
  public Sequence open(int capacity, PolicySpec policy) {
    return new DelegatingSequence(inner.open(capacity, policy));
  }

  @Override
  public PrefixReuse.Cuts prefixCuts() {
    return inner.prefixCuts();
  }

  @Override
  public long defaultPrefixCacheBytes() {
    return inner.defaultPrefixCacheBytes();
  }

  @Override
  public Sequence openFork(int capacity, PolicySpec policy, KeptPrefix prefix) {
    return new DelegatingSequence(inner.openFork(capacity, policy, prefix));
  }

  @Override
  public void close() {
    inner.close();
  }

  /** A sequence that passes every call on to {@code inner}; subclasses override what they change. */
  static class DelegatingSequence implements Sequence {

    final Sequence inner;

    DelegatingSequence(Sequence inner) {
      this.inner = inner;
    }

    @Override
    public void prefill(int[] tokens, float[] logits) {
      inner.prefill(tokens, logits);
    }

    @Override
    public int prefillNext(int[] tokens, float[] logits, Sampler sampler) {
      return inner.prefillNext(tokens, logits, sampler);
    }

    @Override
    public int prefillPartTokens() {
      return inner.prefillPartTokens();
    }

    @Override
    public int prefillPart(int[] tokens, int from, int to, float[] logits, Sampler sampler) {
      return inner.prefillPart(tokens, from, to, logits, sampler);
    }

    @Override
    public KeptPrefix keepPrefix(int tokens) {
      return inner.keepPrefix(tokens);
    }

    @Override
    public void decode(int token, int pos, float[] logits) {
      inner.decode(token, pos, logits);
    }

    @Override
    public int decodeNext(int token, int pos, float[] logits, Sampler sampler) {
      return inner.decodeNext(token, pos, logits, sampler);
    }

    @Override
    public long kvBytesBeforeCompression() {
      return inner.kvBytesBeforeCompression();
    }

    @Override
    public long kvBytes() {
      return inner.kvBytes();
    }

    @Override
    public long kvBytesAfterCompression() {
      return inner.kvBytesAfterCompression();
    }

    @Override
    public double attentionMs() {
      return inner.attentionMs();
    }

    @Override
    public PolicyStats policyStats() {
      return inner.policyStats();
    }

    @Override
    public String policyResolved() {
      return inner.policyResolved();
    }

    @Override
    public void close() {
      inner.close();
    }
  }
}
