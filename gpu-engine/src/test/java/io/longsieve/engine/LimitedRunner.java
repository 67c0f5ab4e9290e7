package io.longsieve.engine;

import io.longsieve.engine.spi.ModelRunner;
import io.longsieve.engine.spi.Sampler;
import io.longsieve.model.ModelConfig;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyStats;

/**
 * A runner that holds at most {@code limit} sequences open and fails a further open with the
 * message of the CUDA driver's out-of-memory error, as a GPU whose memory is full does. Decode
 * steps take the default one-after-the-other path (the CUDA backend's).
 */
final class LimitedRunner implements ModelRunner {

  private final ModelRunner inner;
  private final int limit;
  private int open; // the scheduler thread only

  LimitedRunner(ModelRunner inner, int limit) {
    this.inner = inner;
    this.limit = limit;
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
    if (open == limit) throw new IllegalStateException("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (test runner)");
    Sequence s = inner.open(capacity, policy);
    open++;
    return new Sequence() {
      boolean closed;

      @Override
      public void prefill(int[] tokens, float[] logits) {
        s.prefill(tokens, logits);
      }

      @Override
      public void decode(int token, int pos, float[] logits) {
        s.decode(token, pos, logits);
      }

      @Override
      public int prefillNext(int[] tokens, float[] logits, Sampler sampler) {
        return s.prefillNext(tokens, logits, sampler);
      }

      @Override
      public int decodeNext(int token, int pos, float[] logits, Sampler sampler) {
        return s.decodeNext(token, pos, logits, sampler);
      }

      @Override
      public int prefillPartTokens() {
        return s.prefillPartTokens();
      }

      @Override
      public int prefillPart(int[] tokens, int from, int to, float[] logits, Sampler sampler) {
        return s.prefillPart(tokens, from, to, logits, sampler);
      }

      @Override
      public long kvBytesBeforeCompression() {
        return s.kvBytesBeforeCompression();
      }

      @Override
      public long kvBytes() {
        return s.kvBytes();
      }

      @Override
      public long kvBytesAfterCompression() {
        return s.kvBytesAfterCompression();
      }

      @Override
      public double attentionMs() {
        return s.attentionMs();
      }

      @Override
      public PolicyStats policyStats() {
        return s.policyStats();
      }

      @Override
      public String policyResolved() {
        return s.policyResolved();
      }

      @Override
      public void close() {
        if (!closed) {
          closed = true;
          open--;
          s.close();
        }
      }
    };
  }

  @Override
  public void close() {
    inner.close();
  }
}
