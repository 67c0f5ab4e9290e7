package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.SelectionStats;

/** Dense attention in the prefill and decode slots of a composed policy, counting what it attends. */
final class DenseParts {
  private DenseParts() {}

  static final class Prefill implements ComposedPolicy.Prefill {
    private final SelectionStats stats;

    Prefill(SelectionStats stats) {
      this.stats = stats;
    }

    @Override
    public void prefill(int layer, float[] q, int n, int pos0, KvCache kv, float[] out, AttentionContext ctx) {
      int before = kv.length(layer) - n;
      DenseAttention.attendRows(layer, q, n, pos0, before, kv, out, ctx);
      double pairs = SelectionStats.densePairs(n, before, ctx.config().numHeads());
      stats.prefill(layer, pairs, pairs);
    }
  }

  static final class Decode implements ComposedPolicy.Decode {
    private final SelectionStats stats;

    Decode(SelectionStats stats) {
      this.stats = stats;
    }

    @Override
    public void decode(int layer, float[] q, int pos, KvCache kv, float[] out, AttentionContext ctx) {
      int n = kv.length(layer);
      DenseAttention.attendRows(layer, q, 1, pos, n - 1, kv, out, ctx);
      int heads = ctx.config().numHeads();
      stats.decode(layer, (double) n * heads, pos + 1, heads); // context: the whole sequence, compressed or not
    }
  }
}
