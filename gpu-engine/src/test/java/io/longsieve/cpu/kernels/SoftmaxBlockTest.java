package io.longsieve.cpu.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The attention tile's one check per block of rows ({@link Tiles#rowsStayBelow}) and the step it
 * allows ({@link Tiles#softmaxKeep}): the check is false whenever any row's max would move, and
 * where it is true the keep step gives the per-row step's bits.
 */
class SoftmaxBlockTest {

  private static final int KT = TiledAttention.KEY_TILE;

  @Test
  void blockCheckFailsWhenAnyRowsMaxWouldMove() {
    int rows = 8;
    float[] m = new float[rows], s = new float[rows * KT];
    Arrays.fill(m, 3f);
    Arrays.fill(s, 3f + Tiles.SLACK);                  // at the limit: stays
    assertTrue(Tiles.rowsStayBelow(s, 0, rows, m, 0));
    s[(rows - 1) * KT + KT - 1] = Math.nextUp(3f + Tiles.SLACK); // the last score of the last row goes past it
    assertFalse(Tiles.rowsStayBelow(s, 0, rows, m, 0));
    Arrays.fill(s, Float.NEGATIVE_INFINITY);           // masked scores never move a max
    assertTrue(Tiles.rowsStayBelow(s, 0, rows, m, 0));
    m[4] = Float.NEGATIVE_INFINITY;                    // a row that has seen nothing takes the full step
    assertFalse(Tiles.rowsStayBelow(s, 0, rows, m, 0));
    float[] offset = new float[3 + KT];                // the block may start anywhere in s and m
    float[] mm = {0f, 0f, 1f};
    offset[3 + 5] = 1f + Tiles.SLACK + 1;
    assertFalse(Tiles.rowsStayBelow(offset, 3, 1, mm, 2));
  }

  @Test
  void scalarTwinAgreesOnTheCheck() {
    Random r = new Random(5);
    int rows = 4;
    for (int trial = 0; trial < 200; trial++) {
      float[] s = new float[rows * KT], m = new float[rows];
      for (int i = 0; i < s.length; i++) s[i] = (float) r.nextGaussian() * 4;
      for (int t = 0; t < rows; t++) m[t] = r.nextInt(20) == 0 ? Float.NEGATIVE_INFINITY : 2f + (float) r.nextGaussian() * 3;
      boolean expected = true;
      for (int t = 0; t < rows; t++) {
        if (m[t] == Float.NEGATIVE_INFINITY) expected = false;
        for (int j = 0; j < KT; j++) if (s[t * KT + j] > m[t] + Tiles.SLACK) expected = false;
      }
      assertEquals(expected, ScalarTiles.rowsStayBelow(s, 0, rows, m, 0), "scalar, trial " + trial);
      assertEquals(expected, Tiles.rowsStayBelow(s, 0, rows, m, 0), "dispatched, trial " + trial);
    }
  }

  @Test
  void keepStepHasTheFullStepsBits() {
    Random r = new Random(11);
    int rows = 8, width = 2 * Tiles.NR, compared = 0;
    for (int trial = 0; trial < 50; trial++) {
      float[] s = new float[rows * KT], m = new float[rows], l = new float[rows * Tiles.LANES];
      float[] o = new float[rows * width];
      for (int i = 0; i < s.length; i++) s[i] = (float) r.nextGaussian() * 3 + (r.nextInt(9) == 0 ? Float.NEGATIVE_INFINITY : 0);
      for (int t = 0; t < rows; t++) m[t] = 4f + (float) r.nextGaussian();
      for (int i = 0; i < l.length; i++) l[i] = r.nextFloat();
      for (int i = 0; i < o.length; i++) o[i] = (float) r.nextGaussian();
      if (!Tiles.rowsStayBelow(s, 0, rows, m, 0)) continue;
      compared++;
      float[] s2 = s.clone(), m2 = m.clone(), l2 = l.clone(), o2 = o.clone();
      for (int t = 0; t < rows; t++) {
        Tiles.softmaxKeep(s, t * KT, m, l, t);
        Tiles.softmaxStep(s2, t * KT, m2, l2, t, o2, t * width, width);
      }
      assertArrayEquals(s2, s);
      assertArrayEquals(m2, m);
      assertArrayEquals(l2, l);
      assertArrayEquals(o2, o); // the keep step leaves the outputs alone; so must the full step here
    }
    assertTrue(compared > 25, "most random blocks stay below their maxima: " + compared);
  }
}
