package io.longsieve.cuda.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.longsieve.cuda.kv.KvPagePool;
import io.longsieve.cuda.policy.GpuSelKv;
import io.longsieve.cuda.policy.GpuSnapKv;
import io.longsieve.cuda.policy.GpuStreamingEviction;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Random;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * Host-side logic of the GPU KV compression, on the CPU: budgets as the CPU twins compute them,
 * StreamingLLM's keep list, the page pool's free list, and a Java model of kvc_topk_flags' radix
 * select (the kernel's algorithm, step by step) against the TopK ranking (score, then lower index).
 */
class KvCompressionHostTest {

  @Test
  void budgetsFollowTheCpuTwins() {
    // SelKv: max(sinks + win, round(ratio n))
    assertEquals(250, GpuSelKv.budget(0.25, 4, 32, 1000));
    assertEquals(36, GpuSelKv.budget(0.25, 4, 32, 100));
    assertEquals(32768, GpuSelKv.budget(0.25, 4, 32, 131072));
    // SnapKv: ratio > 0 → round(ratio n), else capacity; at least the window
    assertEquals(2048, GpuSnapKv.capacity(0, 2048, 32, 100000));
    assertEquals(250, GpuSnapKv.capacity(0.25, 2048, 32, 1000));
    assertEquals(32, GpuSnapKv.capacity(0.01, 2048, 32, 1000));
  }

  @Test
  void streamingKeepsSinksAndRecent() {
    int[] keep = GpuStreamingEviction.keepList(2, 3, 10, 2);
    assertArrayEquals(new int[] {0, 1, 7, 8, 9, 0, 1, 7, 8, 9}, keep);
  }

  @Test
  void freeListHandsOutEachPageOnce() {
    KvPagePool.FreeList f = new KvPagePool.FreeList(4);
    assertEquals(0, f.take());
    assertEquals(1, f.take());
    f.give(0);
    assertEquals(3, f.free());
    assertThrows(IllegalArgumentException.class, () -> f.give(0));
    assertThrows(IllegalArgumentException.class, () -> f.give(7));
    assertEquals(0, f.take());
    f.take();
    f.take();
    assertThrows(IllegalStateException.class, f::take);
    assertEquals(0, f.free());
  }

  /** kvc_key: unsigned order of TopK.sortable (the float total order). */
  static int key(float f) {
    int b = Float.floatToRawIntBits(f);
    return (b & 0x80000000) != 0 ? ~b : (b | 0x80000000);
  }

  /** The kernel's selection, sequentially: radix-select the k-th largest key, take above it and the first equals. */
  static boolean[] radixTopK(float[] s, int k) {
    int n = s.length;
    boolean[] f = new boolean[n];
    if (k >= n || k <= 0) {
      Arrays.fill(f, k > 0);
      return f;
    }
    int prefix = 0, mask = 0, remain = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
      int[] hist = new int[256];
      for (float x : s) {
        int u = key(x);
        if ((u & mask) == prefix) hist[(u >>> shift) & 255]++;
      }
      int above = 0, b = 255;
      for (; b > 0; b--) {
        if (above + hist[b] >= remain) break;
        above += hist[b];
      }
      remain -= above;
      prefix |= b << shift;
      mask |= 255 << shift;
    }
    int taken = 0;
    for (int j = 0; j < n; j++) {
      int u = key(s[j]);
      boolean eq = u == prefix;
      f[j] = Integer.compareUnsigned(u, prefix) > 0 || (eq && taken < remain);
      if (eq) taken++;
    }
    return f;
  }

  static boolean[] reference(float[] s, int k) {
    boolean[] f = new boolean[s.length];
    Integer[] idx = IntStream.range(0, s.length).boxed().toArray(Integer[]::new);
    Arrays.sort(idx, Comparator.<Integer>comparingInt(i -> key(s[i]) ^ 0x80000000).reversed()
        .thenComparingInt(i -> i));
    for (int i = 0; i < Math.min(k, s.length); i++) f[idx[i]] = true;
    return f;
  }

  @Test
  void radixSelectMatchesTopKRanking() {
    Random r = new Random(5);
    for (int trial = 0; trial < 300; trial++) {
      int n = 1 + r.nextInt(700), k = r.nextInt(n + 2) - 1;
      float[] s = new float[n];
      int mode = trial % 4;
      for (int j = 0; j < n; j++) {
        s[j] = switch (mode) {
          case 0 -> (float) r.nextGaussian();
          case 1 -> r.nextInt(5) * 0.25f;               // many ties
          case 2 -> r.nextBoolean() ? Float.NEGATIVE_INFINITY : (float) r.nextDouble();  // the union mask
          default -> r.nextBoolean() ? 0f : -0f;         // -0 ranks below +0, as TopK.sortable
        };
      }
      assertArrayEquals(reference(s, k), radixTopK(s, k), "trial " + trial + " n=" + n + " k=" + k);
    }
  }
}
