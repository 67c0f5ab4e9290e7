package io.longsieve.cpu.policy;

import io.longsieve.cpu.kernels.CpuOps;
import io.longsieve.cpu.kernels.KvCache;
import io.longsieve.cpu.kernels.RopeTable;
import java.util.Arrays;

/**
 * Attention of one query head over a list of cache slots, the definition every sparse policy's
 * attention follows: {@code softmax(q·Kᵀ·scale + bias)·V} restricted to the list, in plain loops.
 * Keys come either from the cache's keys rotated at their original positions, or from a
 * caller-filled buffer of keys rotated at their index in the list (compact positions, TokenSelect's
 * and StreamingLLM's re-positioning). Values and the per-slot, per-query-head logit bias always come from the cache.
 * The policies run the same lists through the tiled core ({@link io.longsieve.cpu.kernels.TiledAttention}
 * with {@link io.longsieve.cpu.kernels.KvList#slots} and {@link io.longsieve.cpu.kernels.KvList#gathered});
 * TiledAttentionTest holds the two together, and the GPU's list kernels are tested against this one.
 */
final class ListAttention {
  private ListAttention() {}

  /**
   * One head's output over list entries [0, count).
   *
   * @param h       the query head: it reads KV head h / group and the bias of (slot, h)
   * @param qr      rotated query, headDim values from qo
   * @param slots   cache slots of the list, from so
   * @param keyBuf  null: keys are {@code kv.ropedKeys} at each slot; else (count, headDim) rows from kbo,
   *                entry i already rotated at its list position
   */
  static void attend(int layer, int h, float[] qr, int qo, int[] slots, int so, int count, float[] keyBuf, int kbo,
                     KvCache kv, float[] out, int oo, float scale) {
    int d = kv.kvDim / kv.nKvHeads(), heads = kv.nHeads(), kvh = h / (heads / kv.nKvHeads());
    float[] scores = DenseAttention.scratch(count);
    float[] keys = kv.ropedKeys[layer];
    float[] bias = kv.logitBias[layer];
    for (int i = 0; i < count; i++) {
      int slot = slots[so + i];
      float v = keyBuf == null ? CpuOps.dot(qr, qo, keys, slot * kv.kvDim + kvh * d, d)
          : CpuOps.dot(qr, qo, keyBuf, kbo + i * d, d);
      v *= scale;
      if (bias != null) v += bias[slot * heads + h];
      scores[i] = v;
    }
    CpuOps.softmax(scores, 0, count);
    Arrays.fill(out, oo, oo + d, 0f);
    float[] values = kv.values[layer];
    for (int i = 0; i < count; i++) CpuOps.axpy(scores[i], values, slots[so + i] * kv.kvDim + kvh * d, out, oo, d);
    if (kv.attended != null) kv.attended.attended(layer, oo / d, slots, so, count); // evaluation runs only
  }

  /**
   * Copies the pre-RoPE keys of KV head kvh at slots[so .. so+count) into dst (count, headDim) and
   * rotates row i at position i: the compact positions of a selected list. The caller has
   * called {@code rope.ensure(count)} (the table is not thread-safe to grow).
   */
  static void gatherCompact(int layer, int kvh, int[] slots, int so, int count, KvCache kv, RopeTable rope,
                            float[] dst, int dstOff) {
    int d = kv.kvDim / kv.nKvHeads();
    float[] keys = kv.keys[layer];
    for (int i = 0; i < count; i++) {
      System.arraycopy(keys, slots[so + i] * kv.kvDim + kvh * d, dst, dstOff + i * d, d);
      rope.rotate(dst, dstOff + i * d, i);
    }
  }
}
