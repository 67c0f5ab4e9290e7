package io.longsieve.cuda.policy;

import io.longsieve.policy.SelectionStats;

/** Dense attention in the prefill and decode slots of a GPU policy, counting what it attends. */
final class GpuDense {
  private GpuDense() {}

  static final class Prefill implements GpuParts.Prefill {
    private final SelectionStats stats;
    private final GpuEnv env;

    Prefill(SelectionStats stats, GpuEnv env) {
      this.stats = stats;
      this.env = env;
    }

    @Override
    public void prefill(LayerCall c) {
      int heads = env.config().numHeads();
      env.k().attention(c.out(), c.q(), c.kv(), c.n(), heads, c.before(), env.config().window(c.layer()), env.scale(),
          env.ws());
      double pairs = SelectionStats.densePairs(c.n(), c.before(), heads);
      stats.prefill(c.layer(), pairs, pairs);
    }
  }

  static final class Decode implements GpuParts.Decode {
    private final SelectionStats stats;
    private final GpuEnv env;

    Decode(SelectionStats stats, GpuEnv env) {
      this.stats = stats;
      this.env = env;
    }

    @Override
    public void decode(LayerCall c) {
      int heads = env.config().numHeads();
      env.k().attention(c.out(), c.q(), c.kv(), 1, heads, c.before(), env.config().window(c.layer()), env.scale(), env.ws());
      count(c.layer(), c.before(), c.pos0());
    }

    /** The statistics of one layer's dense decode step (also for steps the model ran batched, outside decode). */
    void count(int layer, int before, int pos0) {
      int heads = env.config().numHeads();
      // context: the whole sequence, compressed or not
      stats.decode(layer, (double) (before + 1) * heads, pos0 + 1, heads);
    }
  }
}
