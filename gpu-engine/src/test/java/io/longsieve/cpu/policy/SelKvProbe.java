package io.longsieve.cpu.policy;

/** SelKV's merge stages ({@link SelKvMerge}, package-private) for the GPU twin's parity tests in other packages. */
public final class SelKvProbe {
  private SelKvProbe() {}

  /** {@link SelKvMerge#targets}. */
  public static int[] targets(int n, int[] kept, int from, int to, float[] mass, int[] position, int bucket) {
    return SelKvMerge.targets(n, kept, from, to, mass, position, bucket);
  }

  /** {@link SelKvMerge#apply} without the diagnostic gate. */
  public static void apply(int g, int n, int[] kept, int[] target, float[] attn, int heads, int group, float[] values,
                           float[] keys, int kvDim, int d, double alpha, float[] bias) {
    SelKvMerge.apply(g, n, kept, target, attn, heads, group, values, keys, kvDim, d, alpha, 0, bias);
  }
}
