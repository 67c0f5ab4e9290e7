package io.longsieve.cuda.policy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import org.junit.jupiter.api.Test;

/** A captured decode part's shape version changes exactly when its shape does: no GPU. */
class ShapeVersionTest {

  @Test
  void theVersionMovesOnlyWhenTheShapeChanges() {
    ShapeVersion v = new ShapeVersion(3);
    int[] shape = {1, 64, 2};
    long a = v.of(shape);
    assertEquals(a, v.of(shape.clone()), "the same shape again");
    shape[2] = 3;
    long b = v.of(shape);
    assertNotEquals(a, b, "one int changed");
    assertEquals(b, v.of(shape));
    shape[2] = 2;
    assertNotEquals(b, v.of(shape), "back to an earlier shape is a new version too (its buffers may have moved)");
  }
}
