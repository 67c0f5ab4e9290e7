package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.apache.spark.resource.ResourceInformation;
import org.junit.jupiter.api.Test;

/** Spark's GPU address → CUDA ordinal, through CUDA_VISIBLE_DEVICES. */
class GpuBindingTest {

  @Test
  void withoutCudaVisibleDevicesTheAddressIsTheOrdinal() {
    assertEquals(0, GpuBinding.ordinal("0", null));
    assertEquals(5, GpuBinding.ordinal("5", null));
  }

  @Test
  void listedAddressMapsToItsPositionInCudaVisibleDevices() {
    assertEquals(1, GpuBinding.ordinal("3", "2,3"));
    assertEquals(0, GpuBinding.ordinal("2", "2,3"));
    assertEquals(2, GpuBinding.ordinal("GPU-c0ffee", "GPU-aaa, GPU-bbb, GPU-c0ffee"));
  }

  @Test
  void isolatedContainerWithOneGpuRenumbersItToZero() {
    // YARN/K8s give the container host GPU 6 and set CUDA_VISIBLE_DEVICES to its UUID
    assertEquals(0, GpuBinding.ordinal("6", "GPU-12345678-abcd"));
    assertEquals(0, GpuBinding.ordinal("6", "6"));
  }

  @Test
  void ambiguousOrHiddenGpusFailWithBothValuesNamed() {
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> GpuBinding.ordinal("5", "0,1"));
    assertTrue(e.getMessage().contains("5") && e.getMessage().contains("0,1"), e.getMessage());
    assertThrows(IllegalStateException.class, () -> GpuBinding.ordinal("0", ""));
    assertThrows(IllegalStateException.class, () -> GpuBinding.ordinal("0", "-1"));
    assertThrows(IllegalStateException.class, () -> GpuBinding.ordinal("GPU-abc", null));
  }

  @Test
  void cudaStopsReadingAtTheFirstInvalidEntry() {
    assertEquals(java.util.List.of("0", "1"), GpuBinding.visibleDevices("0,1,-1,2"));
  }

  @Test
  void resourceMapFromTaskContextOrPlugin() {
    var gpus = Map.of("gpu", new ResourceInformation("gpu", new String[] {"3", "4"}));
    assertEquals(1, GpuBinding.ordinalFor(gpus, "2,3,4"), "first address of the task is used");
    assertEquals(-1, GpuBinding.ordinalFor(Map.of(), null), "no gpu resource: engine default");
    assertEquals(-1, GpuBinding.ordinalFor(null, "0"));
    assertEquals(-1, GpuBinding.forCurrentTask(), "outside a Spark task");
  }
}
