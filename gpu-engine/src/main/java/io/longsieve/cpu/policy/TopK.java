package io.longsieve.cpu.policy;

import java.util.Arrays;

/**
 * Deterministic top-k: the k largest scores, ties broken towards the lower index, returned in
 * ascending index order (the order every policy attends in). Each (score, index) pair is packed
 * into one long whose natural order is the ranking, so a plain quickselect needs no comparator and
 * allocates nothing; O(n) on average.
 */
final class TopK {
  private TopK() {}

  /** An int whose signed order is the float's total order (-0 below +0, NaN above +∞). */
  static int sortable(float f) {
    int b = Float.floatToIntBits(f);
    return b ^ ((b >> 31) & 0x7FFFFFFF);
  }

  /** Rank key of score s at index i: higher score first, then lower index. */
  static long key(float s, int i) {
    return ((long) sortable(s) << 32) | (~i & 0xFFFFFFFFL);
  }

  static int indexOf(long key) {
    return ~(int) key;
  }

  /**
   * Writes to out[oo .. oo+min(k,n)) the indices {@code base + i} of the k largest score[off + i],
   * i &lt; n, ascending. Returns the number written.
   *
   * @param work scratch of at least n longs
   */
  static int select(float[] score, int off, int n, int k, long[] work, int[] out, int oo, int base) {
    if (k >= n) {
      for (int i = 0; i < n; i++) out[oo + i] = base + i;
      return n;
    }
    if (k <= 0) return 0;
    for (int i = 0; i < n; i++) work[i] = key(score[off + i], i);
    nthLargest(work, n, k);
    for (int i = 0; i < k; i++) out[oo + i] = base + indexOf(work[n - k + i]);
    Arrays.sort(out, oo, oo + k);
    return k;
  }

  /** Rearranges a[0..n) so that a[n-k..n) holds its k largest values (in any order). */
  static void nthLargest(long[] a, int n, int k) {
    int lo = 0, hi = n - 1, target = n - k;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      // median of three as pivot, deterministic
      long x = a[lo], y = a[mid], z = a[hi];
      long pivot = Math.max(Math.min(x, y), Math.min(Math.max(x, y), z));
      int i = lo, j = hi;
      while (i <= j) {
        while (a[i] < pivot) i++;
        while (a[j] > pivot) j--;
        if (i <= j) {
          long t = a[i];
          a[i] = a[j];
          a[j] = t;
          i++;
          j--;
        }
      }
      if (target <= j) hi = j;
      else if (target >= i) lo = i;
      else return;
    }
  }
}
