package io.longsieve.cpu.kernels;

import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import java.util.Arrays;

/**
 * One sequence's key/value cache on the CPU, one slot per cached token and layer. Keys are kept
 * before RoPE (so selection policies can score position-neutrally and re-position what they pick);
 * {@code ropedKeys} holds the same keys rotated at their slot's original position, a derived copy
 * that lets attention at original positions skip re-rotating every key on every step. Compression
 * (SelKV and friends) may shrink a layer, so lengths, positions and logit biases are per layer. The
 * logit bias is per slot and QUERY head (SelKV's compensation α·log R_{h,t} differs between the
 * query heads that share a KV head); attention adds {@code logitBias[layer][slot * nHeads + h]}.
 */
public final class KvCache {

  public final int layers;
  public final int kvDim;
  public final int capacity;
  public final float[][] keys;       // (layer) → (capacity, kvDim) f32, before RoPE
  public final float[][] ropedKeys;  // (layer) → (capacity, kvDim) f32, rotated at positions[layer][slot]
  public final float[][] values;     // (layer) → (capacity, kvDim) f32
  public final int[][] positions;    // (layer) → (capacity) original token position of each slot
  public final float[][] logitBias;  // (layer) → (capacity, nHeads) additive logit bias per query head, null until a
                                     //   policy sets one
  public final int[][] headPositions; // (layer) → (capacity, nKvHeads) per-KV-head original positions once heads
                                      //   were compacted differently (SelKV, SnapKV); null while all heads share positions
  /** Evaluation only: told what the attention kernels attended (attention recall); null in every other run. */
  public AttendedKeys attended;
  private final int[] length;        // (layer) slots in use
  private final int nKvHeads;
  private final int nHeads;          // query heads; KV head g serves heads g * group .. (g + 1) * group - 1
  private final Rope rope;
  private final float[] cos;         // (headDim / 2) scratch for append
  private final float[] sin;

  public KvCache(ModelConfig c, Rope rope, int capacity) {
    this.layers = c.numLayers();
    this.kvDim = c.kvDim();
    this.capacity = capacity;
    this.nKvHeads = c.numKvHeads();
    this.nHeads = c.numHeads();
    this.rope = rope;
    this.keys = new float[layers][capacity * kvDim];
    this.ropedKeys = new float[layers][capacity * kvDim];
    this.values = new float[layers][capacity * kvDim];
    this.positions = new int[layers][capacity];
    this.logitBias = new float[layers][];
    this.headPositions = new int[layers][];
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

  /** Query heads: the logit bias's row length. */
  public int nHeads() {
    return nHeads;
  }

  /** Appends n tokens' keys (before RoPE) and values, rows of kvDim starting at k[ko], v[vo]. */
  public void append(int layer, float[] k, int ko, float[] v, int vo, int n, int pos0) {
    append(layer, k, ko, v, vo, n, pos0, rope);
  }

  /** As above, the rotated copy made with {@code rope}: the layer's own table at the call's length. */
  public void append(int layer, float[] k, int ko, float[] v, int vo, int n, int pos0, Rope rope) {
    int start = length[layer];
    if (start + n > capacity) throw new IllegalStateException("KV cache full: " + (start + n) + " > " + capacity);
    for (int i = 0; i < n; i++) {
      int slot = start + i;
      System.arraycopy(k, ko + i * kvDim, keys[layer], slot * kvDim, kvDim);
      System.arraycopy(k, ko + i * kvDim, ropedKeys[layer], slot * kvDim, kvDim);
      System.arraycopy(v, vo + i * kvDim, values[layer], slot * kvDim, kvDim);
      positions[layer][slot] = pos0 + i;
      if (headPositions[layer] != null) Arrays.fill(headPositions[layer], slot * nKvHeads, (slot + 1) * nKvHeads, pos0 + i);
      rope.angles(pos0 + i, cos, sin);
      rope.apply(ropedKeys[layer], slot * kvDim, nKvHeads, cos, sin);
    }
    length[layer] = start + n;
  }

  /** Original position of the token KV head kvHead holds in slot. */
  public int position(int layer, int slot, int kvHead) {
    int[] hp = headPositions[layer];
    return hp == null ? positions[layer][slot] : hp[slot * nKvHeads + kvHead];
  }

  /** The layer's logit bias (capacity, nHeads), created (zeros) on first use. */
  public float[] logitBias(int layer) {
    if (logitBias[layer] == null) logitBias[layer] = new float[capacity * nHeads];
    return logitBias[layer];
  }

  /**
   * Compaction after eviction: KV head g keeps the slots keep[g][0 .. count) (ascending), which
   * move to slots 0 .. count-1 with their keys (both copies), values, positions and the bias of
   * g's query heads. Every
   * head keeps the same number of tokens, so later tokens still append at one slot for all heads.
   */
  public void retain(int layer, int[][] keep, int count) {
    if (keep.length != nKvHeads) throw new IllegalArgumentException("one keep list per KV head");
    int d = kvDim / nKvHeads, n = length[layer], group = nHeads / nKvHeads;
    boolean same = true;
    for (int g = 1; g < nKvHeads && same; g++) {
      for (int i = 0; i < count; i++) {
        if (keep[g][i] != keep[0][i]) {
          same = false;
          break;
        }
      }
    }
    if (!same && headPositions[layer] == null) {
      int[] hp = new int[capacity * nKvHeads];
      for (int s = 0; s < n; s++) Arrays.fill(hp, s * nKvHeads, (s + 1) * nKvHeads, positions[layer][s]);
      headPositions[layer] = hp;
    }
    float[] bias = logitBias[layer];
    int[] hp = headPositions[layer];
    for (int g = 0; g < nKvHeads; g++) {
      int prev = -1;
      for (int i = 0; i < count; i++) {
        int from = keep[g][i];
        if (from <= prev || from >= n) throw new IllegalArgumentException("keep lists must ascend within [0, " + n + ")");
        prev = from;
        if (from == i) continue;
        int fo = from * kvDim + g * d, to = i * kvDim + g * d;
        System.arraycopy(keys[layer], fo, keys[layer], to, d);
        System.arraycopy(ropedKeys[layer], fo, ropedKeys[layer], to, d);
        System.arraycopy(values[layer], fo, values[layer], to, d);
        if (bias != null) System.arraycopy(bias, from * nHeads + g * group, bias, i * nHeads + g * group, group);
        if (hp != null) hp[i * nKvHeads + g] = hp[from * nKvHeads + g];
      }
    }
    for (int i = 0; i < count; i++) positions[layer][i] = hp != null ? hp[i * nKvHeads] : positions[layer][keep[0][i]];
    if (bias != null) Arrays.fill(bias, count * nHeads, n * nHeads, 0f);
    length[layer] = count;
  }

  /**
   * Makes this (empty) cache hold src's first {@code tokens} slots of every layer, as src holds them:
   * keys (both copies), values and positions. A kept prompt prefix and its forks (prefix reuse): src
   * must be as the prefill left it, every layer that long and nothing compacted.
   */
  public void copyPrefix(KvCache src, int tokens) {
    if (src.layers != layers || src.kvDim != kvDim) throw new IllegalArgumentException("a cache of another model's shapes");
    if (tokens > capacity) throw new IllegalArgumentException("prefix of " + tokens + " tokens over capacity " + capacity);
    for (int l = 0; l < layers; l++) {
      if (length[l] != 0) throw new IllegalStateException("copyPrefix needs an empty cache");
      if (src.length[l] < tokens || src.logitBias[l] != null || src.headPositions[l] != null) {
        throw new IllegalStateException("layer " + l + " holds no plain prefix of " + tokens + " tokens");
      }
      System.arraycopy(src.keys[l], 0, keys[l], 0, tokens * kvDim);
      System.arraycopy(src.ropedKeys[l], 0, ropedKeys[l], 0, tokens * kvDim);
      System.arraycopy(src.values[l], 0, values[l], 0, tokens * kvDim);
      System.arraycopy(src.positions[l], 0, positions[l], 0, tokens);
      length[l] = tokens;
    }
  }

  /** Bytes this cache would hold on a GPU in bf16 (keys and values of the slots in use), plus fp32 logit biases. */
  public long bf16Bytes() {
    long bytes = 0;
    for (int l = 0; l < layers; l++) {
      bytes += (long) length[l] * kvDim * 2L * 2L;
      if (logitBias[l] != null) bytes += (long) length[l] * nHeads * 4L;
    }
    return bytes;
  }
}
