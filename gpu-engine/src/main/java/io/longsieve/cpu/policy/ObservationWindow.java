package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.model.ModelConfig;
import java.util.Arrays;

/**
 * The last W prompt queries of every layer, kept while the prompt streams through in chunks, and
 * the attention they pay to the prompt: the observation window SnapKV and SelKV score the cache
 * with after prefill.
 */
final class ObservationWindow {

  private final int w, qDim, heads, d, group;
  private final float[][] rows; // (layer) → (w, nHeads * headDim) queries before RoPE, oldest first
  private final int[] count;    // (layer) rows held (≤ w)

  ObservationWindow(int w, ModelConfig c) {
    this.w = w;
    this.qDim = c.qDim();
    this.heads = c.numHeads();
    this.d = c.headDim();
    this.group = c.group();
    this.rows = new float[c.numLayers()][w * qDim];
    this.count = new int[c.numLayers()];
  }

  /** Keeps the last w of the rows seen so far for this layer. */
  void observe(int layer, float[] q, int n) {
    float[] r = rows[layer];
    if (n >= w) {
      System.arraycopy(q, (n - w) * qDim, r, 0, w * qDim);
      count[layer] = w;
      return;
    }
    int keepOld = Math.min(count[layer], w - n);
    System.arraycopy(r, (count[layer] - keepOld) * qDim, r, 0, keepOld * qDim);
    System.arraycopy(q, 0, r, keepOld * qDim, n * qDim);
    count[layer] = keepOld + n;
  }

  int count(int layer) {
    return count[layer];
  }

  /**
   * attn[h, j] = Σ over window rows r of softmax(q_r·k/√d + bias_h)[j] for slots j &lt; N (the whole cache),
   * row r at position and slot N − count + r, causal; rotated at those positions.
   *
   * @param attn (heads, N) output, grown by the caller
   */
  void attention(int layer, KvCache kv, AttentionContext ctx, float[] attn) {
    int n = kv.length(layer), cnt = count[layer];
    float[] keys = kv.ropedKeys[layer], r = rows[layer];
    float[] bias = kv.logitBias[layer];
    float scale = ctx.scale();
    int kvDim = kv.kvDim;
    ctx.pool().forRange(heads, (from, to) -> {
      RotationScratch rs = RotationScratch.of(d);
      float[] qr = rs.qr, cos = rs.cos, sin = rs.sin, s = new float[n];
      for (int h = from; h < to; h++) {
        int ao = h * n, kvh = h / group;
        Arrays.fill(attn, ao, ao + n, 0f);
        for (int i = 0; i < cnt; i++) {
          int slot = n - cnt + i, visible = slot + 1;
          System.arraycopy(r, i * qDim + h * d, qr, 0, d);
          ctx.rope().angles(kv.positions[layer][slot], cos, sin);
          ctx.rope().apply(qr, 0, 1, cos, sin);
          for (int j = 0; j < visible; j++) {
            s[j] = CpuOps.dot(qr, 0, keys, j * kvDim + kvh * d, d) * scale + (bias == null ? 0 : bias[j * heads + h]);
          }
          CpuOps.softmax(s, 0, visible);
          for (int j = 0; j < visible; j++) attn[ao + j] += s[j];
        }
      }
    });
  }
}
