package io.longsieve.cuda.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.model.QuantizationConfig.Activations;
import java.io.IOException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The host side of the FP8 kernels: launch constants equal to the kernels' #defines, and which layouts run FP8. No GPU. */
class Fp8HostTest {

  @Test
  void launchConstantsAreTheKernels() throws IOException {
    String f = "hopper/gemm_fp8_sm90.cu";
    int bm = KernelDefines.of(f, "GF_BM"), bn = KernelDefines.of(f, "GF_BN"), bk = KernelDefines.of(f, "GF_BK");
    int stages = KernelDefines.of(f, "GF_STAGES"), bStages = KernelDefines.of(f, "GFB_STAGES"), bBn = KernelDefines.of(f, "GFB_BN");
    assertEquals(stages * (bm + bn) * bk + 1024 + 2 * stages * 8, Fp8Kernels.GEMM_SMEM, "GF_SMEM");
    assertEquals(bStages * (bm + bBn) * bk + 1024 + 2 * bStages * 8, Fp8Kernels.GEMM_BLOCK_SMEM, "GFB_SMEM");
    assertEquals(Fp8Kernels.GROUP, bk, "one K slice is one scale block");
    assertEquals(Fp8Kernels.GROUP, bBn, "one block tile's weight rows share one scale row");
    assertEquals(Fp8Kernels.GROUP, KernelDefines.of("fp8/fp8.cu", "FP8_GROUP"));
    assertEquals(Kernels.GEMV_MAX_ROWS, KernelDefines.of("fp8/fp8.cu", "GF8_NB"));
    int optin = 227 * 1024;  // H100/H200
    assertTrue(Fp8Kernels.GEMM_SMEM <= optin && Fp8Kernels.GEMM_BLOCK_SMEM <= optin);
  }

  @ParameterizedTest(name = "block={0} {1}x{2} {3} k={4} parts={5}: {6}")
  @CsvSource({
      "false, 0, 0, DYNAMIC_TOKEN, 4096, 4096;1024;1024, true",
      "false, 0, 0, STATIC_TENSOR, 64, 64, true",
      "false, 0, 0, WEIGHT_ONLY, 64, 64, true",
      "false, 0, 0, DYNAMIC_GROUP, 4096, 4096, false",   // per-group activation scales need block weights
      "false, 0, 0, DYNAMIC_TOKEN, 4100, 4096, false",   // K not a multiple of 16
      "true, 128, 128, DYNAMIC_GROUP, 8192, 8192;1024;1024, true",
      "true, 128, 128, DYNAMIC_TOKEN, 8192, 28672;28672, true",
      "true, 128, 128, DYNAMIC_GROUP, 128, 256;64;64, false",  // a 64-row part would share a block row with the next
      "true, 64, 64, DYNAMIC_GROUP, 4096, 4096, false",
  })
  void fp8KernelsTakeTheseLayouts(boolean block, int br, int bc, Activations act, long k, String parts, boolean fits) {
    long[] rows = java.util.Arrays.stream(parts.split(";")).mapToLong(Long::parseLong).toArray();
    assertEquals(fits, Fp8Kernels.fits(block, br, bc, act, k, rows));
  }
}
