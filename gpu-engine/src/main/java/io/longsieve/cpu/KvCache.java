package io.longsieve.cpu;

import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;

/**
 * One sequence's key/value cache on the CPU, one slot per cached token and layer. Keys are kept
 * before RoPE (so selection policies can score position-neutrally and re-position what they pick);
 * {@code ropedKeys} holds the same keys rotated at their slot's original position, a derived copy
 * that lets attention at original positions skip re-rotating every key on every step. Compression
 * (SelKV and friends) may shrink a layer, so lengths, positions and logit biases are per layer.
 */
public final class KvCache {

  public final int layers;
  public final int kvDim;
  public final int capacity;
  public final float[][] keys;       // (layer) → (capacity, kvDim) f32, before RoPE
  public final float[][] ropedKeys;  // (layer) → (capacity, kvDim) f32, rotated at positions[layer][slot]
  public final float[][] values;     // (layer) → (capacity, kvDim) f32
  public final int[][] positions;    // (layer) → (capacity) original token position of each slot
  public final float[][] logitBias;  // (layer) → (capacity, nKvHeads) additive logit bias, null until a policy sets one
  private final int[] length;        // (layer) slots in use
  private final int nKvHeads;
  private final Rope rope;
  private final float[] cos;         // (headDim / 2) scratch for append
  private final float[] sin;

  public KvCache(ModelConfig c, Rope rope, int capacity) {
    this.layers = c.numLayers();
    this.kvDim = c.kvDim();
    this.capacity = capacity;
    this.nKvHeads = c.numKvHeads();
    this.rope = rope;
    this.keys = new float[layers][capacity * kvDim];
    this.ropedKeys = new float[layers][capacity * kvDim];
    this.values = new float[layers][capacity * kvDim];
    this.positions = new int[layers][capacity];
    this.logitBias = new float[layers][];
    this.length = new int[layers];
    this.cos = new float[c.headDim() / 2];
    this.sin = new float[c.headDim() / 2];
  }

  public int length(int layer) {
    return length[layer];
  }

  /** Slots in use after a policy rewrote the layer (compression). */
  public void setLength(int layer, int n) {
    if (n < 0 || n > capacity) throw new IllegalArgumentException("length " + n + " outside [0, " + capacity + "]");
    length[layer] = n;
  }

  public int nKvHeads() {
    return nKvHeads;
  }

  /** Appends n tokens' keys (before RoPE) and values, rows of kvDim starting at k[ko], v[vo]. */
  public void append(int layer, float[] k, int ko, float[] v, int vo, int n, int pos0) {
    int start = length[layer];
    if (start + n > capacity) throw new IllegalStateException("KV cache full: " + (start + n) + " > " + capacity);
    for (int i = 0; i < n; i++) {
      int slot = start + i;
      System.arraycopy(k, ko + i * kvDim, keys[layer], slot * kvDim, kvDim);
      System.arraycopy(k, ko + i * kvDim, ropedKeys[layer], slot * kvDim, kvDim);
      System.arraycopy(v, vo + i * kvDim, values[layer], slot * kvDim, kvDim);
      positions[layer][slot] = pos0 + i;
      rope.angles(pos0 + i, cos, sin);
      rope.apply(ropedKeys[layer], slot * kvDim, nKvHeads, cos, sin);
    }
    length[layer] = start + n;
  }

  /** Bytes this cache would hold on a GPU in bf16 (keys and values of the slots in use). */
  public long bf16Bytes() {
    long slots = 0;
    for (int l = 0; l < layers; l++) slots += length[l];
    return slots * kvDim * 2L * 2L;
  }
}
