package io.longsieve.cuda.kernels;

import io.longsieve.cuda.driver.KernelModule;
import io.longsieve.cuda.driver.TensorMaps;
/**
 * When and how the engine runs its sm_90a kernels (src/main/cuda/hopper): the wgmma GEMM and the
 * FlashAttention-3-style prefill attention, both fed by TMA. They run by themselves on compute
 * capability 9.0 (H100, H200) when the sm_90a module is loaded (KernelModule) and the driver's
 * tensor-map encoder is reachable ({@link TensorMaps}); {@code -Dlongsieve.hopper=false} turns them
 * off (the sm_80 mma.sync kernels then run, as on every other GPU), for a comparison or a fault
 * hunt. Launch constants mirror the kernels' #defines (HopperHostTest pins them).
 */
final class Hopper {
  private Hopper() {}

  static final int THREADS = 384;                               // GH_THREADS, AH_THREADS: producer + 2 consumers
  static final int GEMM_SMEM = 4 * (128 + 256) * 64 * 2 + 1024 + 2 * 4 * 8;  // GH_SMEM
  static final int ATTN_ROWS = 128;                             // AH_BQ: query rows (positions x heads) per block

  /** Dynamic shared memory of attn_prefill_sm90_d{d} (AhLayout<D>::SMEM): Q, 2 stages of K and V, barriers. */
  static int attnSmem(int d) {
    int tile = (d / 64) * 128 * 128;
    int stages = 2;
    return (1 + 2 * stages) * tile + 8 * (1 + 4 * stages) + 1024;  // full Q; full and empty K, V per stage
  }

  /** Whether G query heads per KV head pack into one attention tile (128 / G positions of G heads). */
  static boolean packs(int g) {
    return g == 1 || g == 2 || g == 4 || g == 8;
  }

  /**
   * Row tiles that walk the column tiles together in gemm_sm90's raster: every row tile of a
   * prefill chunk (up to 16, 2048 rows), so each tile of W is read from memory about once per
   * chunk while the activations stay in L2.
   */
  static int gemmRowGroup(int m) {
    return Math.max(1, Math.min((m + 127) / 128, 16));
  }

  static String requirement() {
    return "compute capability 9.0 and the driver's tensor-map encoder";
  }

  /** Whether the engine runs the sm_90a kernels on this module's GPU (supported and not turned off). */
  static boolean usable(KernelModule module) {
    return module.hasHopper()
        && usable(module.context().computeCapability(), TensorMaps.available(), System.getProperty("longsieve.hopper"));
  }

  /** Whether this module's GPU can run them at all: the sm_90a module loaded and tensor maps to be had. */
  static boolean supported(KernelModule module) {
    return module.hasHopper() && module.context().computeCapability() == 90 && TensorMaps.available();
  }

  /** The rule itself: compute capability 9.0, tensor maps to be had, and longsieve.hopper not "false". */
  static boolean usable(int computeCapability, boolean tensorMaps, String property) {
    return computeCapability == 90 && tensorMaps && !"false".equals(property);
  }
}
