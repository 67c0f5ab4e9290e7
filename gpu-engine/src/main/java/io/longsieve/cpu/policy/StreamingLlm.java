package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;

/**
 * StreamingLLM baseline (mit-han-lab/streaming-llm, research/algorithms.md §4): attention sinks
 * (the first {@code sinks} tokens) plus the last {@code recent} tokens. As KV compression
 * ({@link Eviction}) the cache keeps exactly those after the prompt and evicts the oldest
 * non-sink token at every decode step that overfills it (a rolling cache); as decode policy
 * ({@link Window}) each step attends only to them, with positions re-assigned by cache index
 * ({@code positions=compact}, the official pos_shift) or original. {@code --policy streaming}
 * uses both, which is the official rolling cache.
 */
final class StreamingLlm {
  private StreamingLlm() {}

  static final class Eviction implements ComposedPolicy.Kv {
    private final int sinks, recent;

    Eviction(PolicyTerm t) {
      sinks = t.intParam("sinks");
      recent = t.intParam("recent");
    }

    @Override
    public void compress(KvCache kv, AttentionContext ctx) {
      for (int layer = 0; layer < kv.layers; layer++) {
        int n = kv.length(layer);
        if (sinks + recent >= n || ctx.config().window(layer) > 0) continue;  // sliding layers stay whole
        int[] keep = new int[sinks + recent];
        for (int i = 0; i < sinks; i++) keep[i] = i;
        for (int i = 0; i < recent; i++) keep[sinks + i] = n - recent + i;
        int[][] all = new int[kv.nKvHeads()][];
        java.util.Arrays.fill(all, keep);
        kv.retain(layer, all, sinks + recent);
      }
    }

    /** The rolling cache: once a step overfills it, the oldest token after the sinks goes. */
    @Override
    public boolean afterDecode(int layer, float[] q, int pos, KvCache kv, AttentionContext ctx) {
      int n = kv.length(layer);
      if (n <= sinks + recent) return false;
      int[] keep = new int[n - 1];
      for (int i = 0, o = 0; i < n; i++) if (i != sinks) keep[o++] = i;
      int[][] all = new int[kv.nKvHeads()][];
      java.util.Arrays.fill(all, keep);
      kv.retain(layer, all, n - 1);
      return true;
    }
  }

  static final class Window implements ComposedPolicy.Decode {
    private final SelectionStats stats;
    private final int sinks, recent, heads, d, group, kvHeads;
    private final boolean compact;
    private final ListAttention.RopeTable table;
    private int[] list = new int[0];       // (listLen) sinks ++ recent slots
    private float[] keyBuf = new float[0]; // (kvHeads, listLen, headDim) keys rotated at list index

    Window(PolicyTerm t, SelectionStats stats, AttentionContext ctx) {
      this.stats = stats;
      sinks = t.intParam("sinks");
      recent = Math.max(1, t.intParam("recent"));
      compact = t.text("positions").equals("compact");
      heads = ctx.config().numHeads();
      d = ctx.config().headDim();
      group = ctx.config().group();
      kvHeads = ctx.config().numKvHeads();
      table = new ListAttention.RopeTable(ctx.rope());
    }

    @Override
    public void decode(int layer, float[] q, int pos, KvCache kv, float[] out, AttentionContext ctx) {
      table.use(ctx.rope());
      int n = kv.length(layer);
      if (sinks + recent >= n) {
        DenseAttention.attendRows(layer, q, 1, pos, n - 1, kv, out, ctx);
        stats.decode(layer, (double) n * heads, pos + 1, heads);
        return;
      }
      int len = sinks + recent;
      if (list.length < len) list = new int[len];
      for (int i = 0; i < sinks; i++) list[i] = i;
      for (int i = 0; i < recent; i++) list[sinks + i] = n - recent + i;
      if (compact) {
        table.ensure(len);
        if (keyBuf.length < kvHeads * len * d) keyBuf = new float[kvHeads * len * d];
        for (int g = 0; g < kvHeads; g++) ListAttention.gatherCompact(layer, g, list, 0, len, kv, table, keyBuf, g * len * d);
      }
      float scale = ctx.scale();
      ctx.pool().forRange(heads, (from, to) -> {
        RotationScratch rs = RotationScratch.of(d);
        float[] qr = rs.qr, cos = rs.cos, sin = rs.sin;
        for (int h = from; h < to; h++) {
          int g = h / group;
          System.arraycopy(q, h * d, qr, 0, d);
          if (compact) {
            table.rotate(qr, 0, len - 1);
            ListAttention.attend(layer, h, qr, 0, list, 0, len, keyBuf, g * len * d, kv, out, h * d, scale);
          } else {
            ctx.rope().angles(pos, cos, sin);
            ctx.rope().apply(qr, 0, 1, cos, sin);
            ListAttention.attend(layer, h, qr, 0, list, 0, len, null, 0, kv, out, h * d, scale);
          }
        }
      });
      stats.decode(layer, (double) len * heads, pos + 1, heads);
    }
  }
}
