package io.longsieve.cpu.policy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * SelKV's stages 3-5 ({@link SelKvMerge}) one at a time against brute-force versions written from
 * the seed's description: routing by position bucket, the value-cosine gate, the attention-weighted
 * merged value and the per-query-head compensation bias.
 */
class SelKvMergeTest {

  /**
   * Routing, brute force: for each dropped slot scan every selected token; those of its bucket
   * decide by mass (the first maximum in slot order), else the closest by position (the earlier on
   * a tie). Random kept sets and positions with gaps and repeats, masses with exact ties, buckets
   * from 1 (always the nearest) to larger than the sequence (the single most attended).
   */
  @Test
  void routingGoesToTheMostAttendedKeptTokenOfTheBucketElseTheNearest() {
    Random r = new Random(7);
    for (int trial = 0; trial < 60; trial++) {
      int n = 20 + r.nextInt(200), sinks = r.nextInt(4), win = 1 + r.nextInt(6);
      int bucket = new int[] {1, 2, 3, 8, 16, 1000}[trial % 6];
      int[] position = new int[n];
      for (int i = 1; i < n; i++) position[i] = position[i - 1] + (r.nextInt(5) == 0 ? 0 : 1 + r.nextInt(3));
      float[] mass = new float[n];
      for (int i = 0; i < n; i++) mass[i] = r.nextInt(4) == 0 ? 0.5f : r.nextFloat();  // a quarter tied
      boolean[] selected = new boolean[n];
      int pick = 0;
      for (int i = sinks; i < n - win; i++) if (selected[i] = r.nextInt(trial % 3 == 0 ? 12 : 4) == 0) pick++;
      if (trial == 5) { // nothing selected: nothing is routed
        java.util.Arrays.fill(selected, false);
        pick = 0;
      }
      int[] kept = new int[sinks + pick + win];
      int k = 0;
      for (int i = 0; i < sinks; i++) kept[k++] = i;
      for (int i = sinks; i < n - win; i++) if (selected[i]) kept[k++] = i;
      for (int i = n - win; i < n; i++) kept[k++] = i;

      int[] want = new int[n];
      for (int i = 0; i < n; i++) {
        want[i] = -1;
        boolean isKept = i < sinks || i >= n - win || selected[i];
        if (isKept || pick == 0) continue;
        int best = -1;
        for (int t = sinks; t < sinks + pick; t++) {
          if (Math.floorDiv(position[kept[t]], bucket) != Math.floorDiv(position[i], bucket)) continue;
          if (best < 0 || mass[kept[t]] > mass[kept[best]]) best = t;
        }
        if (best < 0) {
          for (int t = sinks; t < sinks + pick; t++) {
            int dist = Math.abs(position[kept[t]] - position[i]);
            if (best < 0 || dist < Math.abs(position[kept[best]] - position[i])) best = t;
          }
        }
        want[i] = best;
      }
      int[] got = SelKvMerge.targets(n, kept, sinks, sinks + pick, mass, position, bucket);
      assertArrayEquals(want, got, "trial " + trial + " bucket " + bucket);
    }
  }

  @Test
  void gateIsTheClippedCosineOfTheValues() {
    Random r = new Random(8);
    int d = 16;
    for (int trial = 0; trial < 200; trial++) {
      float[] x = new float[2 * d];
      for (int e = 0; e < x.length; e++) x[e] = (float) r.nextGaussian();
      if (trial % 3 == 1) for (int e = 0; e < d; e++) x[d + e] = 0.9f * x[e] + 0.2f * (float) r.nextGaussian();
      if (trial % 3 == 2) for (int e = 0; e < d; e++) x[d + e] = -x[e];  // opposite: dropped
      double xy = 0, xx = 0, yy = 0;
      for (int e = 0; e < d; e++) {
        xy += x[e] * x[d + e];
        xx += x[e] * x[e];
        yy += x[d + e] * x[d + e];
      }
      double cos = xy / Math.sqrt(xx * yy);
      assertEquals(Math.max(cos, 0), SelKvMerge.gate(x, 0, x, d, d, 0), 1e-6, "trial " + trial);
      assertEquals(cos >= 0.5 ? cos : 0, SelKvMerge.gate(x, 0, x, d, d, 0.5), 1e-6, "threshold, trial " + trial);
    }
    assertEquals(0f, SelKvMerge.gate(new float[4], 0, new float[] {1, 2, 3, 4}, 0, 4, 0));  // a zero vector
    assertEquals(1f, SelKvMerge.gate(new float[] {1, 2, 3, 4}, 0, new float[] {2, 4, 6, 8}, 0, 4, 0), 1e-6f);
  }

  /**
   * The merged value v'_t = (A_t v_t + Σ g_i A_i v_i) / (A_t + Σ g_i A_i) per KV head (A summed
   * over its query heads), the merged key likewise (merge=kv), and per query head the bias
   * α log((a_ht + Σ g_i a_hi) / a_ht), from random attention and values: plain loops in fp64.
   */
  @Test
  void mergedValueAndBiasFollowTheirDefinitions() {
    Random r = new Random(9);
    int n = 60, heads = 6, group = 3, nKv = 2, d = 8, kvDim = nKv * d;
    double alpha = 0.7;
    for (boolean withKeys : new boolean[] {false, true}) {
      float[] attn = new float[heads * n], values = new float[n * kvDim], keys = new float[n * kvDim];
      for (int i = 0; i < attn.length; i++) attn[i] = r.nextFloat() * 0.3f;
      for (int i = 0; i < values.length; i++) {
        values[i] = (float) r.nextGaussian();
        keys[i] = (float) r.nextGaussian();
      }
      // tokens 20..24 resemble kept token 10 (gates near 1); the rest are random (gates ~0.3 or 0)
      for (int i = 20; i < 25; i++) for (int e = 0; e < kvDim; e++) values[i * kvDim + e] = values[10 * kvDim + e] + 0.1f * (float) r.nextGaussian();
      int[] kept = {0, 10, 30, 45, 58, 59};
      float[] v0 = values.clone(), k0 = keys.clone();
      float[] bias = new float[n * heads];
      for (int g = 0; g < nKv; g++) {
        int[] target = new int[n];
        for (int i = 0; i < n; i++) target[i] = contains(kept, i) ? -1 : i < 20 ? 1 : i < 38 ? 2 : 3;  // any routing
        target[5] = -1;  // a dropped token with no target: evicted
        SelKvMerge.apply(g, n, kept, target, attn, heads, group, values, withKeys ? keys : null, kvDim, d, alpha, 0, bias);
        for (int t = 0; t < kept.length; t++) {
          int slot = kept[t];
          double at = 0, w = 0;
          for (int h = g * group; h < (g + 1) * group; h++) at += attn[h * n + slot];
          double[] vs = new double[d], ks = new double[d];
          for (int e = 0; e < d; e++) {
            vs[e] = at * v0[slot * kvDim + g * d + e];
            ks[e] = at * k0[slot * kvDim + g * d + e];
          }
          double[] headMass = new double[group];
          for (int i = 0; i < n; i++) {
            if (target[i] != t) continue;
            double gi = Math.max(0, cos(v0, i * kvDim + g * d, slot * kvDim + g * d, d));
            double ai = 0;
            for (int h = g * group; h < (g + 1) * group; h++) {
              ai += attn[h * n + i];
              headMass[h - g * group] += gi * attn[h * n + i];
            }
            w += gi * ai;
            for (int e = 0; e < d; e++) {
              vs[e] += gi * ai * v0[i * kvDim + g * d + e];
              ks[e] += gi * ai * k0[i * kvDim + g * d + e];
            }
          }
          for (int e = 0; e < d; e++) {
            double wantV = w > 0 ? vs[e] / (at + w) : v0[slot * kvDim + g * d + e];
            double wantK = w > 0 && withKeys ? ks[e] / (at + w) : k0[slot * kvDim + g * d + e];
            assertEquals(wantV, values[slot * kvDim + g * d + e], 1e-5 * (1 + Math.abs(wantV)), "value of " + slot);
            assertEquals(wantK, keys[slot * kvDim + g * d + e], 1e-5 * (1 + Math.abs(wantK)), "key of " + slot);
          }
          for (int h = g * group; h < (g + 1) * group; h++) {
            double aht = attn[h * n + slot], m = headMass[h - g * group];
            double want = m > 0 ? alpha * Math.log((aht + m) / aht) : 0;
            assertEquals(want, bias[slot * heads + h], 1e-5 * (1 + want), "bias of " + slot + " head " + h);
          }
        }
        for (int i = 0; i < n; i++) {  // dropped slots are not written (retain discards them)
          if (!contains(kept, i)) assertEquals(v0[i * kvDim + g * d], values[i * kvDim + g * d]);
        }
      }
    }
  }

  /**
   * The failure of the former merge (unweighted average, every token at gate ≈ 1): kept token t
   * holds most of the window's attention, forty barely attended tokens of its bucket have values
   * related to but not equal to its own (cosine ≈ 0.5, so they do merge). The attention-weighted
   * average leaves t's value almost unchanged; the unweighted one replaces it with theirs.
   */
  @Test
  void aHighlyAttendedKeptTokenKeepsItsOwnValue() {
    Random r = new Random(10);
    int n = 50, heads = 2, d = 16;
    float[] attn = new float[heads * n], values = new float[n * d];
    for (int h = 0; h < heads; h++) {
      for (int j = 0; j < n; j++) attn[h * n + j] = 0.002f;
      attn[h * n + 5] = 0.9f;  // t = slot 5
    }
    for (int e = 0; e < d; e++) values[5 * d + e] = (float) r.nextGaussian();
    for (int i = 6; i < 46; i++) {
      for (int e = 0; e < d; e++) values[i * d + e] = 0.3f * values[5 * d + e] + 0.5f * (float) r.nextGaussian();
    }
    float[] v0 = values.clone();
    int[] kept = {0, 5, 46, 47, 48, 49};
    int[] target = new int[n];
    java.util.Arrays.fill(target, -1);
    for (int i = 6; i < 46; i++) target[i] = 1;
    SelKvMerge.apply(0, n, kept, target, attn, heads, heads, values, null, d, d, 1, 0, new float[n * heads]);
    double moved = 0, norm = 0, unweighted = 0, gates = 0;
    double[] old = new double[d];
    for (int i = 6; i < 46; i++) {
      double gi = Math.max(0, cos(v0, i * d, 5 * d, d));
      gates += gi;
      for (int e = 0; e < d; e++) old[e] += gi * v0[i * d + e];
    }
    assertTrue(gates / 40 > 0.4, "the tokens do merge (mean gate " + gates / 40 + ")");
    for (int e = 0; e < d; e++) {
      double vt = v0[5 * d + e], former = (vt + old[e]) / (1 + gates);
      moved += (values[5 * d + e] - vt) * (values[5 * d + e] - vt);
      unweighted += (former - vt) * (former - vt);
      norm += vt * vt;
    }
    double rel = Math.sqrt(moved / norm), relFormer = Math.sqrt(unweighted / norm);
    assertTrue(rel < 0.1, "the weighted merge moved the kept value by " + rel);
    assertTrue(relFormer > 0.5, "the unweighted merge would move it by " + relFormer);
  }

  static boolean contains(int[] a, int x) {
    for (int v : a) if (v == x) return true;
    return false;
  }

  static double cos(float[] v, int a, int b, int d) {
    double ab = 0, aa = 0, bb = 0;
    for (int e = 0; e < d; e++) {
      ab += (double) v[a + e] * v[b + e];
      aa += (double) v[a + e] * v[a + e];
      bb += (double) v[b + e] * v[b + e];
    }
    return aa == 0 || bb == 0 ? 0 : ab / Math.sqrt(aa * bb);
  }
}
