package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.model.ModelConfig;

/**
 * Exact causal attention over every cached slot, at original positions: softmax(q·kᵀ/√d + bias)·V
 * per query head, query head h reading KV head h / group. Honours a per-slot, per-query-head logit bias when a
 * compression policy set one, and the layer's sliding window ({@link AttentionContext#window}) where it
 * has one: slots and positions coincide there, as compression leaves sliding-window layers whole.
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
    int heads = c.numHeads();
    ctx.pool().forRange(n * heads, (from, to) -> {
      RotationScratch rs = RotationScratch.of(c.headDim());
      float[] qr = rs.qr, cos = rs.cos, sin = rs.sin;
      int lastRow = -1;
      for (int task = from; task < to; task++) {
        int i = task / heads, h = task % heads;
        if (i != lastRow) {
          ctx.rope().angles(pos0 + i, cos, sin);
          lastRow = i;
        }
        System.arraycopy(q, ((row0 + i) * heads + h) * c.headDim(), qr, 0, c.headDim());
        ctx.rope().apply(qr, 0, 1, cos, sin);
        int end = before + i + 1;
        int start = ctx.window() > 0 ? Math.max(0, end - ctx.window()) : 0;  // a sliding-window layer
        attendHead(layer, h, qr, start, end, kv, out, ((row0 + i) * heads + h) * c.headDim(), ctx);
      }
    });
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

  static float[] scratch(int n) {
    float[] s = SCRATCH.get();
    if (s.length < n) {
      s = new float[Math.max(n, s.length * 2)];
      SCRATCH.set(s);
    }
    return s;
  }
}
