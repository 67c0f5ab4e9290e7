package io.longsieve.policy;

/**
 * Token Sparse Attention's fixed keep ({@code tsa:keep=F}), shared by the CPU policy and the GPU's
 * GpuTsa so both keep the same count. A benchmark knob, not the paper's algorithm: with random
 * weights attention is near uniform and tau's cumulative-mass cut-off keeps almost every token, so
 * {@code keep} fixes the sparsity to time a sparse layer at a realistic ratio. The tokens are still
 * ranked by the same pooled proxy score and the window is still attended.
 */
public final class TsaKeep {
  private TsaKeep() {}

  /** True when {@code keep} replaces tau's cut-off (0 means unset: use tau). */
  public static boolean fixed(double keep) {
    return keep > 0;
  }

  /**
   * Prefix tokens to keep per head: max(min, ⌈keep · prefix⌉). The caller treats a count &gt;= prefix
   * as "nothing to drop" (dense), so keep = 1 is dense attention. The 1e-9 keeps a product such as
   * 0.07 × 100 = 7.000000000000001 from rounding up to 8.
   */
  public static int count(int prefix, double keep, int min) {
    int k = (int) Math.min(prefix, Math.ceil(keep * prefix - 1e-9));
    return Math.max(min, k);
  }
}
