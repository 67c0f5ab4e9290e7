package io.longsieve.cpu.kernels;

/**
 * The keys and values one KV head attends over, as a list of entries j = 0, 1, ...: entry j's key
 * is {@code keys[keyBase + k(j) · keyStride ..+ headDim)} with k(j) = j or keyIdx[keyIdxOff + j],
 * its value {@code values[valueBase + slot(j) · valueStride ..)} with slot(j) = j or
 * valueIdx[valueIdxOff + j], and its logit bias, when there is one, {@code bias[biasBase + slot(j) ·
 * biasStride]}. Covers the whole cache, a list of selected slots, and selected slots whose keys
 * were gathered and re-rotated into a buffer (compact positions).
 */
public record KvList(float[] keys, int keyBase, int keyStride, int[] keyIdx, int keyIdxOff,
                     float[] values, int valueBase, int valueStride, int[] valueIdx, int valueIdxOff,
                     float[] bias, int biasBase, int biasStride) {

  /** Every slot of layer's cache for KV head g, in slot order; keys rotated at their original positions. */
  public static KvList cache(KvCache kv, int layer, int g) {
    int d = kv.kvDim / kv.nKvHeads();
    return new KvList(kv.ropedKeys[layer], g * d, kv.kvDim, null, 0, kv.values[layer], g * d, kv.kvDim, null, 0,
        kv.logitBias[layer], g, kv.nKvHeads());
  }

  /** The cache slots slots[off], slots[off + 1], ... of KV head g; keys rotated at their original positions. */
  public static KvList slots(KvCache kv, int layer, int g, int[] slots, int off) {
    int d = kv.kvDim / kv.nKvHeads();
    return new KvList(kv.ropedKeys[layer], g * d, kv.kvDim, slots, off, kv.values[layer], g * d, kv.kvDim, slots, off,
        kv.logitBias[layer], g, kv.nKvHeads());
  }

  /** As {@link #slots}, with entry j's key read from keyBuf row j (headDim values from kbo + j · headDim). */
  public static KvList gathered(KvCache kv, int layer, int g, int[] slots, int off, float[] keyBuf, int kbo) {
    int d = kv.kvDim / kv.nKvHeads();
    return new KvList(keyBuf, kbo, d, null, 0, kv.values[layer], g * d, kv.kvDim, slots, off,
        kv.logitBias[layer], g, kv.nKvHeads());
  }

  int keyOffset(int j) {
    return keyBase + (keyIdx == null ? j : keyIdx[keyIdxOff + j]) * keyStride;
  }

  int slot(int j) {
    return valueIdx == null ? j : valueIdx[valueIdxOff + j];
  }

  int valueOffset(int j) {
    return valueBase + slot(j) * valueStride;
  }
}
