package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.KvCache;
import java.util.Arrays;

/**
 * TokenSelect's {@code index=int4} scoring copy of the pre-RoPE keys: per layer, slot and KV head a
 * scale = max|k| / 7 and the values round(k / scale) in [-7, 7], one per byte. {@link #update}
 * quantises the slots appended since the last call of the layer; after {@link #clear} (slots moved)
 * the next update quantises the layer again from slot 0. The GPU part (cuda/policy/GpuTokenSelect, kernel
 * ts_quantise) keeps the same copy and rounds the same way. Apart from TokenSelect because the copy,
 * its quantiser and its dot product are one unit that the scoring only reads through {@link #dot}.
 * Not thread-safe to update; {@link #dot} may run on many threads once the update is done. The
 * arrays grow to the cache's capacity and are reused.
 */
final class Int4KeyIndex {

  private final int kvHeads, d;
  private final byte[][] keys;     // (layer) → (slots, kvHeads, headDim) int4 keys, one per byte
  private final float[][] scales;  // (layer) → (slots, kvHeads) their scales
  private final int[] indexed;     // (layer) slots quantised so far

  Int4KeyIndex(int layers, int kvHeads, int headDim) {
    this.kvHeads = kvHeads;
    this.d = headDim;
    keys = new byte[layers][0];
    scales = new float[layers][0];
    indexed = new int[layers];
  }

  /** Quantises this layer's slots [indexed, length) into the int4 copy. */
  void update(int layer, KvCache kv) {
    int n = kv.length(layer), kvDim = kv.kvDim;
    if (indexed[layer] > n) indexed[layer] = 0;
    if (keys[layer].length < n * kvDim) {
      int cap = Math.max(n, kv.capacity);
      keys[layer] = Arrays.copyOf(keys[layer], cap * kvDim);
      scales[layer] = Arrays.copyOf(scales[layer], cap * kvHeads);
    }
    for (int s = indexed[layer]; s < n; s++) {
      for (int g = 0; g < kvHeads; g++) {
        scales[layer][s * kvHeads + g] = quantise(kv.keys[layer], s * kvDim + g * d, d, keys[layer], s * kvDim + g * d);
      }
    }
    indexed[layer] = n;
  }

  /** Forgets what was quantised: the next update of every layer quantises all its slots again. */
  void clear() {
    Arrays.fill(indexed, 0);
  }

  /**
   * Symmetric int4 of x[off .. off+n): returns scale = max|x| / 7 and writes round(x / scale)
   * clamped to [-7, 7] (0 when the scale is 0); the GPU kernel rounds the same way (floor(x + 0.5)).
   */
  static float quantise(float[] x, int off, int n, byte[] out, int oo) {
    float mx = 0;
    for (int i = 0; i < n; i++) mx = Math.max(mx, Math.abs(x[off + i]));
    float scale = mx / 7f;
    for (int i = 0; i < n; i++) {
      int v = scale > 0 ? (int) Math.floor(x[off + i] / scale + 0.5f) : 0;
      out[oo + i] = (byte) Math.max(-7, Math.min(7, v));
    }
    return scale;
  }

  /** scale · (q[qo .. qo+headDim) · the int4 key of slot and KV head g): the int4 copy's q·k. */
  float dot(int layer, float[] q, int qo, int slot, int g) {
    byte[] b = keys[layer];
    int bo = (slot * kvHeads + g) * d;
    float s = 0;
    for (int i = 0; i < d; i++) s += q[qo + i] * b[bo + i];
    return scales[layer][slot * kvHeads + g] * s;
  }
}
