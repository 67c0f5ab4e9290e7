package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.KvList;
import io.longsieve.cpu.kernels.RopeTable;
import io.longsieve.cpu.kernels.TiledAttention;
import io.longsieve.model.ModelConfig;

/**
 * Exact causal attention over every cached slot, at original positions: softmax(q·kᵀ/√d + bias)·V
 * per query head, query head h reading KV head h / group. Honours a per-slot, per-query-head logit bias when a
 * compression policy set one, and the layer's sliding window ({@link AttentionContext#window}: a query at
 * position p sees the slots whose position is &gt; p − window). Runs on {@link TiledAttention}: a task takes
 * a tile of query positions with all the query heads of one KV head; {@link #attendHead} is the plain
 * definition (the oracle policy's and the tests' reference).
 */
public final class DenseAttention implements AttentionPolicy {

  private static final ThreadLocal<float[]> SCRATCH = ThreadLocal.withInitial(() -> new float[0]);

  @Override
  public String describe() {
    return "dense";
  }

  @Override
  public void prefill(int layer, float[] q, int n, int pos0, KvCache kv, float[] out, AttentionContext ctx) {
    int before = kv.length(layer) - n;
    attendRows(layer, q, n, pos0, before, kv, out, ctx);
  }

  @Override
  public void decode(int layer, float[] q, int pos, KvCache kv, float[] out, AttentionContext ctx) {
    attendRows(layer, q, 1, pos, kv.length(layer) - 1, kv, out, ctx);
  }

  /** Query row i (position pos0 + i) sees slots [0, before + i + 1). */
  static void attendRows(int layer, float[] q, int n, int pos0, int before, KvCache kv, float[] out,
                         AttentionContext ctx) {
    attendRows(layer, q, 0, n, pos0, before, kv, out, ctx);
  }

  /** As above for rows row0 .. row0+n-1 of q and out (a sub-chunk of a prefill chunk). */
  static void attendRows(int layer, float[] q, int row0, int n, int pos0, int before, KvCache kv, float[] out,
                         AttentionContext ctx) {
    ModelConfig c = ctx.config();
    int heads = c.numHeads(), group = c.group(), d = c.headDim(), window = ctx.window();
    RopeTable table = ctx.ropeTable();
    table.ensure(pos0 + n);
    TiledAttention.run(ctx.pool(), ctx.tiles(), c.numKvHeads(), group, d, ctx.scale(), new TiledAttention.Problem() {
      @Override
      public int positions(int g) {
        return n;
      }

      @Override
      public KvList keys(int g) {
        return KvList.cache(kv, layer, g);
      }

      @Override
      public void query(int g, int i, int hh, float[] dst, int off) {
        System.arraycopy(q, ((row0 + i) * heads + g * group + hh) * d, dst, off, d);
        table.rotate(dst, off, pos0 + i);
      }

      @Override
      public int from(int g, int i) {
        return window > 0 ? windowStart(kv, layer, g, before + i + 1, pos0 + i, window) : 0;
      }

      @Override
      public int to(int g, int i) {
        return before + i + 1;
      }

      @Override
      public int outOffset(int g, int i, int hh) {
        return ((row0 + i) * heads + g * group + hh) * d;
      }
    }, out, kv.attended, layer);
  }

  /** One head's attention over slots [start, end) with the already rotated query qr. */
  static void attendHead(int layer, int h, float[] qr, int start, int end, KvCache kv, float[] out, int oo,
                         AttentionContext ctx) {
    ModelConfig c = ctx.config();
    int d = c.headDim(), kvh = h / c.group(), n = end - start;
    float[] scores = scratch(n);
    float scale = ctx.scale();
    float[] keys = kv.ropedKeys[layer];
    float[] bias = kv.logitBias[layer];
    for (int s = start; s < end; s++) {
      float v = CpuOps.dot(qr, 0, keys, s * kv.kvDim + kvh * d, d) * scale;
      if (bias != null) v += bias[s * kv.nHeads() + h];
      scores[s - start] = v;
    }
    CpuOps.softmax(scores, 0, n);
    java.util.Arrays.fill(out, oo, oo + d, 0f);
    float[] values = kv.values[layer];
    for (int s = start; s < end; s++) CpuOps.axpy(scores[s - start], values, s * kv.kvDim + kvh * d, out, oo, d);
    if (kv.attended != null) kv.attended.attendedRange(layer, oo / d, start, end); // evaluation runs only
  }

  /** First slot in [0, end) whose position (for KV head g) is &gt; pos − window; positions ascend by slot. */
  static int windowStart(KvCache kv, int layer, int g, int end, int pos, int window) {
    int lo = 0, hi = end - 1; // the query's own slot is always inside
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (kv.position(layer, mid, g) > pos - window) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  static float[] scratch(int n) {
    float[] s = SCRATCH.get();
    if (s.length < n) {
      s = new float[Math.max(n, s.length * 2)];
      SCRATCH.set(s);
    }
    return s;
  }
}
