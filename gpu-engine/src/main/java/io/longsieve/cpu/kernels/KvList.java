package io.longsieve.cpu.kernels;

/**
 * The keys and values one KV head attends over, as a list of entries j = 0, 1, ...: entry j's key
 * is {@code keys[keyBase + k(j) · keyStride ..+ headDim)} with k(j) = j or keyIdx[keyIdxOff + j],
 * its value {@code values[valueBase + slot(j) · valueStride ..)} with slot(j) = j or
 * valueIdx[valueIdxOff + j], and its logit bias for the group's query head hh, when there is one,
 * {@code bias[biasBase + slot(j) · biasStride + hh]} (the cache's bias is per slot and query head). Covers the whole cache, a list of selected slots, and selected slots whose keys
 * were gathered and re-rotated into a buffer (compact positions).
 */
public record KvList(float[] keys, int keyBase, int keyStride, int[] keyIdx, int keyIdxOff,
                     float[] values, int valueBase, int valueStride, int[] valueIdx, int valueIdxOff,
                     float[] bias, int biasBase, int biasStride) {

  /**
   * Every slot of layer's cache for KV head g, in slot order; keys rotated at their original
   * positions; the group's heads are the query heads of g.
   */
  public static KvList cache(KvCache kv, int layer, int g) {
    int d = kv.kvDim / kv.nKvHeads();
    return new KvList(kv.ropedKeys[layer], g * d, kv.kvDim, null, 0, kv.values[layer], g * d, kv.kvDim, null, 0,
        kv.logitBias[layer], g * group(kv), kv.nHeads());
  }

  /** The cache slots slots[off], slots[off + 1], ... of KV head g; keys rotated at their original positions. */
  public static KvList slots(KvCache kv, int layer, int g, int[] slots, int off) {
    int d = kv.kvDim / kv.nKvHeads();
    return new KvList(kv.ropedKeys[layer], g * d, kv.kvDim, slots, off, kv.values[layer], g * d, kv.kvDim, slots, off,
        kv.logitBias[layer], g * group(kv), kv.nHeads());
  }

  /** As {@link #slots}, for query head h alone (a group of one head with its own list): KV head h / group, h's bias. */
  public static KvList headSlots(KvCache kv, int layer, int h, int[] slots, int off) {
    int d = kv.kvDim / kv.nKvHeads(), g = h / group(kv);
    return new KvList(kv.ropedKeys[layer], g * d, kv.kvDim, slots, off, kv.values[layer], g * d, kv.kvDim, slots, off,
        kv.logitBias[layer], h, kv.nHeads());
  }

  /** As {@link #slots}, with entry j's key read from keyBuf row j (headDim values from kbo + j · headDim). */
  public static KvList gathered(KvCache kv, int layer, int g, int[] slots, int off, float[] keyBuf, int kbo) {
    int d = kv.kvDim / kv.nKvHeads();
    return new KvList(keyBuf, kbo, d, null, 0, kv.values[layer], g * d, kv.kvDim, slots, off,
        kv.logitBias[layer], g * group(kv), kv.nHeads());
  }

  private static int group(KvCache kv) {
    return kv.nHeads() / kv.nKvHeads();
  }

  /** Where entry j's bias for the group's query head hh is in {@link #bias}. */
  int biasOffset(int j, int hh) {
    return biasBase + slot(j) * biasStride + hh;
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
