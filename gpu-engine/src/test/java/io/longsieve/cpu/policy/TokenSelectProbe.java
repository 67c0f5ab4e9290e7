package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.PolicySpec;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;

/**
 * The CPU TokenSelect for tests outside this package (the GPU parity test): runs it and shows
 * what it selected, the votes it selected from and its statistics.
 */
public final class TokenSelectProbe {

  private final TokenSelect ts;
  private final SelectionStats stats;
  private final AttentionContext ctx;
  private final int pool, sinks;

  public TokenSelectProbe(String params, AttentionContext ctx) {
    PolicyTerm t = PolicySpec.parse("prefill=tokenselect:" + params).prefill();
    this.stats = new SelectionStats(ctx.config().numLayers());
    this.ts = new TokenSelect(t, stats, ctx);
    this.ctx = ctx;
    this.pool = t.intParam("pool");
    this.sinks = t.intParam("sinks");
  }

  public void prefill(int layer, float[] q, int n, int pos0, KvCache kv, float[] out) {
    ts.prefill(layer, q, n, pos0, kv, out, ctx);
  }

  public void decode(int layer, float[] q, int pos, KvCache kv, float[] out) {
    ts.decode(layer, q, pos, kv, out, ctx);
  }

  public void reset() {
    ts.reset();
  }

  /** (lists, listLen) slots of the last sparse call. */
  public int[] lists() {
    return ts.lastLists();
  }

  public int listLen() {
    return ts.lastListLen();
  }

  /**
   * The value top-k ranked slot s by in the last scored call of list g (the vote, max-pooled when
   * pool is on), NaN outside the candidates.
   */
  public float selectionValue(int g, int slot, int lists) {
    float[] v = ts.lastVotes();
    int cands = v.length / lists, i = slot - sinks;
    float[] row = java.util.Arrays.copyOfRange(v, g * cands, (g + 1) * cands);
    if (pool > 1) row = TokenSelectTest.maxPoolReference(row, pool);
    return i >= 0 && i < row.length ? row[i] : Float.NaN;
  }

  public SelectionStats stats() {
    return stats;
  }
}
