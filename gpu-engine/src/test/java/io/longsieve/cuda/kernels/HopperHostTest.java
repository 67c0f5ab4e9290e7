package io.longsieve.cuda.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cuda.driver.TensorMaps;
import java.io.IOException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The host side of the sm_90a kernels: launch constants equal to the kernels' and the plan rules. Runs without a GPU. */
class HopperHostTest {

  @Test
  void launchConstantsAreTheKernels() throws IOException {
    assertEquals(Hopper.THREADS, KernelDefines.of("hopper/gemm_sm90.cu", "GH_THREADS"));
    assertEquals(Hopper.THREADS, KernelDefines.of("hopper/prefill_sm90.cu", "AH_THREADS"));
    assertEquals(Hopper.ATTN_ROWS, KernelDefines.of("hopper/prefill_sm90.cu", "AH_BQ"));
    int stages = KernelDefines.of("hopper/gemm_sm90.cu", "GH_STAGES");
    int bm = KernelDefines.of("hopper/gemm_sm90.cu", "GH_BM"), bn = KernelDefines.of("hopper/gemm_sm90.cu", "GH_BN");
    int bk = KernelDefines.of("hopper/gemm_sm90.cu", "GH_BK");
    assertEquals(stages * (bm + bn) * bk * 2 + 1024 + 2 * stages * 8, Hopper.GEMM_SMEM, "GH_SMEM");
    assertEquals(2, KernelDefines.of("hopper/prefill_sm90.cu", "AH_STAGES"), "attnSmem assumes two stages");
  }

  @Test
  void everyKernelFitsTheHopperSharedMemoryLimit() {
    int optin = 227 * 1024;  // cudaDevAttrMaxSharedMemoryPerBlockOptin on H100/H200
    assertTrue(Hopper.GEMM_SMEM <= optin, "gemm " + Hopper.GEMM_SMEM);
    assertTrue(Hopper.attnSmem(128) <= optin, "attention d128 " + Hopper.attnSmem(128));
    assertEquals(5 * 16384 + 72 + 1024, Hopper.attnSmem(64));
  }

  @ParameterizedTest(name = "G={0} packs={1}")
  @CsvSource({"1, true", "2, true", "4, true", "8, true", "3, false", "16, false", "6, false"})
  void queryHeadsPackWhenTheyDivideTheTile(int g, boolean packs) {
    assertEquals(packs, Hopper.packs(g));
    if (packs) assertEquals(0, Hopper.ATTN_ROWS % g);
  }

  @ParameterizedTest(name = "m={0} group={1}")
  @CsvSource({"9, 1", "128, 1", "129, 2", "4096, 16", "131072, 16"})
  void rowGroupCoversAChunkUpTo2048Rows(int m, int group) {
    assertEquals(group, Hopper.gemmRowGroup(m));
  }

  @ParameterizedTest(name = "cc={0} maps={1} property={2}: {3}")
  @CsvSource({"90, true, , true", "90, true, true, true", "90, true, false, false", "90, false, , false",
      "80, true, , false", "89, true, true, false", "100, true, , false"})
  void hopperKernelsRunByThemselvesOnComputeNineWithTensorMapsUnlessTurnedOff(int cc, boolean maps, String property, boolean usable) {
    assertEquals(usable, Hopper.usable(cc, maps, property));
  }

  @Test
  void withoutADriverTheReasonIsGiven() {
    // CI has no GPU: either JNA found no libcuda (and says so) or a driver is present
    assertTrue(TensorMaps.available() || TensorMaps.unavailableReason().contains("libcuda"),
        String.valueOf(TensorMaps.unavailableReason()));
  }
}
