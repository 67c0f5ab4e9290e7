package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import java.util.Comparator;
import java.util.Random;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** Top-k against sorting everything; ties go to the lower index, every time. */
class TopKTest {

  static int[] bruteForce(float[] s, int k) {
    Integer[] idx = IntStream.range(0, s.length).boxed().toArray(Integer[]::new);
    Arrays.sort(idx, Comparator.<Integer>comparingDouble(i -> -s[i]).thenComparingInt(i -> i));
    int[] top = new int[Math.min(k, s.length)];
    for (int i = 0; i < top.length; i++) top[i] = idx[i];
    Arrays.sort(top);
    return top;
  }

  @Test
  void matchesSortingOnRandomScoresWithManyTies() {
    Random r = new Random(1);
    for (int trial = 0; trial < 300; trial++) {
      int n = 1 + r.nextInt(200), k = r.nextInt(n + 3);
      float[] s = new float[n];
      // few distinct values (ties everywhere), negatives and zeros of both signs included
      for (int i = 0; i < n; i++) s[i] = trial % 3 == 0 ? r.nextInt(4) - 2 : (float) r.nextGaussian();
      int[] out = new int[n + 3];
      int got = TopK.select(s, 0, n, k, new long[n], out, 0, 0);
      assertArrayEquals(bruteForce(s, k), Arrays.copyOf(out, got), "trial " + trial);
    }
  }

  @Test
  void tiesKeepTheLowestIndicesAndTheResultIsRepeatable() {
    float[] s = new float[100]; // all equal
    int[] a = new int[10], b = new int[10];
    TopK.select(s, 0, 100, 10, new long[100], a, 0, 5);
    TopK.select(s, 0, 100, 10, new long[100], b, 0, 5);
    assertArrayEquals(IntStream.range(5, 15).toArray(), a);
    assertArrayEquals(a, b);
  }

  @Test
  void sortableKeyOrdersLikeFloats() {
    float[] v = {Float.NEGATIVE_INFINITY, -3f, -0.5f, -0f, 0f, 1e-30f, 2f, Float.POSITIVE_INFINITY};
    for (int i = 1; i < v.length; i++) assertEquals(-1, Integer.compare(TopK.sortable(v[i - 1]), TopK.sortable(v[i])));
  }
}
