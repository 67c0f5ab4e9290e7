package io.longsieve.cuda.policy;

import java.util.Arrays;

/**
 * The shape version of a captured decode part ({@link GpuParts.CapturedDecode#planStep}): a number
 * that changes whenever the ints describing what its launches bake in (sizes, grids, buffer
 * reallocations, decisions) differ from the last step's, so that cuda/DecodeStep makes a new graph
 * exactly then. Not thread-safe: one sequence.
 */
final class ShapeVersion {

  private final int[] last;
  private long version;

  ShapeVersion(int ints) {
    last = new int[ints];
  }

  /** The version for this step's shape (the last step's number when the shape is the same). */
  long of(int[] shape) {
    if (!Arrays.equals(shape, last)) {
      version++;
      System.arraycopy(shape, 0, last, 0, last.length);
    }
    return version;
  }
}
