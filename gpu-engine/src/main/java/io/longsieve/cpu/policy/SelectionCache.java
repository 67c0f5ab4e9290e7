package io.longsieve.cpu.policy;

import java.util.Arrays;

/**
 * TokenSelect's Selection Cache ({@code cache=on}, research/algorithms.md §1): per layer, the
 * fingerprint the last fresh top-k was scored with and that top-k. A later call of the same layer
 * reuses the top-k when its fingerprint's cosine with the cached one is ≥ threshold and the budget
 * (top-k per list) is unchanged; {@link #clear} forgets every layer (the cache's slots moved). Apart
 * from TokenSelect because it is the policy's only state that lives from one call to the next and
 * decides what is computed: what is kept, when it matches and when it is forgotten read in one place.
 * Not thread-safe (one per policy, like TokenSelect's buffers). Allocates once, per layer, the
 * fingerprints up front and a top-k array when a larger one is stored.
 */
final class SelectionCache {

  private final float[][] fingerprint;  // (layer) → (heads * headDim) fingerprint the cached top-k was scored with
  private final int[][] top;            // (layer) → (lists, count) selected candidate slots
  private final int[] count;            // (layer) top-k per list in the cache; 0: empty

  SelectionCache(int layers, int fingerprintLength) {
    fingerprint = new float[layers][fingerprintLength];
    top = new int[layers][0];
    count = new int[layers];
  }

  /** Whether layer's cached top-k has count entries per list and was scored with a fingerprint close to qf. */
  boolean hit(int layer, float[] qf, int count, double threshold) {
    return this.count[layer] == count && cosine(qf, fingerprint[layer]) >= threshold;
  }

  /** Copies the first n entries of layer's cached top-k (lists, count) into dst[0 .. n). */
  void copyTop(int layer, int[] dst, int n) {
    System.arraycopy(top[layer], 0, dst, 0, n);
  }

  /** Remembers qf and the fresh top-k src (lists, count) as layer's entry. */
  void store(int layer, float[] qf, int[] src, int lists, int count) {
    System.arraycopy(qf, 0, fingerprint[layer], 0, qf.length);
    if (top[layer].length < lists * count) top[layer] = new int[lists * count];
    System.arraycopy(src, 0, top[layer], 0, lists * count);
    this.count[layer] = count;
  }

  /** A copy of every layer's entry (a kept prompt prefix carries it to its forks). */
  SelectionCache copy() {
    SelectionCache c = new SelectionCache(fingerprint.length, fingerprint.length == 0 ? 0 : fingerprint[0].length);
    c.copyFrom(this);
    return c;
  }

  /** Takes every layer's entry from src (same shapes). */
  void copyFrom(SelectionCache src) {
    for (int l = 0; l < count.length; l++) {
      System.arraycopy(src.fingerprint[l], 0, fingerprint[l], 0, fingerprint[l].length);
      top[l] = src.top[l].clone();
      count[l] = src.count[l];
    }
  }

  /** Forgets every layer's entry: the next call of each layer scores afresh. */
  void clear() {
    Arrays.fill(count, 0);
  }

  /** Cosine of a and b in double, clamped to [-1, 1]; 0 when either is zero. */
  static double cosine(float[] a, float[] b) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < a.length; i++) {
      ab += (double) a[i] * b[i];
      aa += (double) a[i] * a[i];
      bb += (double) b[i] * b[i];
    }
    if (aa == 0 || bb == 0) return 0;
    return Math.max(-1, Math.min(1, ab / Math.sqrt(aa * bb)));
  }
}
