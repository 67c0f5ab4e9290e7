package io.longsieve.cpu.policy;

/** cpu/policy/TopK for tests outside this package (the Java model of the GPU top-k kernel). */
public final class TopKProbe {
  private TopKProbe() {}

  /**
   * What TokenSelect.select puts in one list's top: TopK.select of the count largest of v (base +
   * index, ascending, ties to the lower index), padded with its last index when count exceeds v's
   * length.
   */
  public static int[] select(float[] v, int count, int base) {
    int n = v.length;
    int[] out = new int[count];
    int got = TopK.select(v, 0, n, Math.min(count, n), new long[Math.max(1, n)], out, 0, base);
    for (int i = got; i < count; i++) out[i] = out[got - 1];
    return out;
  }
}
