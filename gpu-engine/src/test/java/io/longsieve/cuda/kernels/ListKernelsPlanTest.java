package io.longsieve.cuda.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** How ListKernels chooses its path and splits a list over blocks (host side only: runs without a GPU). */
class ListKernelsPlanTest {

  /** H200 opt-in shared memory per block; every plan must fit the smaller 99 KB of consumer GPUs too. */
  static final int SMEM_LIMIT = 99 * 1024;

  @ParameterizedTest(name = "n={0} list={1} d={2} group={3} nKv={4} bias={5}")
  @CsvSource({"1, 2688, 128, 4, 8, false", "1, 1, 128, 4, 8, false", "3, 700, 64, 8, 4, true",
      "1, 131072, 128, 16, 1, false", "512, 2688, 128, 4, 8, true", "1, 300, 16, 4, 2, false",
      "512, 700, 16, 4, 8, true", "3, 200, 8, 16, 1, true", "3, 5000, 256, 8, 2, false", "1, 100000, 32, 3, 3, false"})
  void plansCoverEveryEntryAndFitSharedMemory(int n, int listLen, int d, int group, int nKv, boolean bias) {
    for (boolean compact : new boolean[] {false, true}) plansCover(n, listLen, d, group, nKv, bias, compact);
  }

  private static void plansCover(int n, int listLen, int d, int group, int nKv, boolean bias, boolean compact) {
    ListKernels.Plan p = ListKernels.plan(n, listLen, d, group, nKv, bias, compact, 132, 0);
    assertTrue(p.path() != ListKernels.Path.GATHER_PREFILL, "bias or few rows never gather: " + p);
    assertEquals(0, p.chunk() % 64, "whole 64-entry steps");
    assertTrue((long) p.chunk() * p.splits() >= listLen, "every entry is in a split");
    assertTrue((long) p.chunk() * (p.splits() - 1) < listLen, "no split is empty for the last row");
    if (p.path() == ListKernels.Path.TC_DECODE) {
      assertTrue(p.chunk() <= ListKernels.TC_CHUNK_MAX);
      int smem = ListKernels.tcSmem(d, p.chunk(), p.stages(), compact);
      assertTrue(smem <= SMEM_LIMIT, "tensor-core smem " + smem);
      assertTrue(3 * (smem + 1024) <= 228 * 1024, "three blocks (the launch bound) resident on an H200: " + p);
      assertTrue(p.stages() >= 1 && p.stages() <= ListKernels.TC_MAX_STAGES, "tile buffers " + p);
      assertTrue(p.stages() <= p.chunk() / 64, "no buffer without a tile: " + p);
      // the warps' merge reuses the tile buffers ((warps, 16, d + 8) f32) and the offsets' space ((warps, 16, 2) f32)
      assertTrue(ListKernels.TC_WARPS * 16 * (d + 8) * 4 <= p.stages() * ListKernels.tcStageBytes(d),
          "merge fits the tile buffers");
      assertTrue(ListKernels.TC_WARPS * 16 * 2 * 4 <= p.chunk() * 8, "max and sum fit the offsets");
    } else {
      int heads = Math.min(group, ListKernels.CORE_HEADS);
      assertEquals((group + 7) / 8, p.headBlocks());
      assertTrue(4L * heads * p.chunk() <= 40 * 1024, "scores fit 40 KB");
      assertTrue(ListKernels.coreSmem(heads, p.chunk()) <= SMEM_LIMIT, "core smem");
      assertTrue(ListKernels.CORE_THREADS * 8 >= d * (ListKernels.CORE_THREADS / (d / 8)), "reduction scratch");
    }
  }

  @Test
  void pathsFollowHeadSizeRowsAndBias() {
    assertEquals(ListKernels.Path.TC_DECODE, ListKernels.plan(1, 2688, 128, 4, 8, false, 132).path());
    assertEquals(ListKernels.Path.TC_DECODE, ListKernels.plan(8, 2688, 64, 4, 8, false, 132).path());
    assertEquals(ListKernels.Path.GATHER_PREFILL, ListKernels.plan(9, 2688, 128, 4, 8, false, 132).path());
    assertEquals(ListKernels.Path.GATHER_PREFILL, ListKernels.plan(512, 2688, 128, 16, 8, false, 132).path());
    assertEquals(ListKernels.Path.TC_DECODE, ListKernels.plan(512, 2688, 128, 4, 8, true, 132).path());
    assertEquals(ListKernels.Path.CORE, ListKernels.plan(1, 2688, 16, 4, 8, false, 132).path());
    assertEquals(ListKernels.Path.CORE, ListKernels.plan(512, 2688, 256, 4, 8, false, 132).path());
  }

  @ParameterizedTest(name = "compact={0}")
  @CsvSource({"false", "true"})
  void llamaDecodeRequestsTheWholeListInOneRound(boolean compact) {
    // 8B shapes: a 2688-entry list over 8 KV heads must give (nearly) every multiprocessor work
    ListKernels.Plan p = ListKernels.plan(1, 2688, 128, 4, 8, false, compact, 132, 0);
    assertTrue(p.splits() * 8 >= 132, "at least one block per multiprocessor: " + p);
    // every block resident at once (three per multiprocessor, the launch bound) ...
    assertTrue(p.splits() * 8 <= 3 * 132, "one wave: " + p);
    assertTrue(3 * (ListKernels.tcSmem(128, p.chunk(), p.stages(), compact) + 1024) <= 228 * 1024, "three fit: " + p);
    // ... and every warp's tiles in its buffers: all loads of the list go out in one round
    assertEquals(p.chunk(), 64 * p.stages(), "one round of loads: " + p);
    // two buffers per warp, 21 splits of 128, compact keys as original ones (their RoPE needs no buffer)
    assertEquals(2, p.stages(), "buffers per warp");
    assertEquals(21, p.splits(), "splits");
  }

  @ParameterizedTest(name = "n={0} list={1} d={2} group={3} nKv={4} bias={5} override={6}")
  @CsvSource({"1, 2688, 128, 4, 8, false, 0", "1, 2688, 64, 4, 8, false, 0", "8, 2688, 128, 4, 8, true, 0",
      "1, 131072, 128, 16, 1, false, 0", "3, 700, 64, 8, 4, true, 0", "1, 60000, 128, 8, 1, false, 0",
      "1, 2688, 128, 4, 8, false, 64", "1, 2688, 128, 4, 8, false, 192", "1, 2688, 128, 4, 8, false, 256",
      "1, 5000, 64, 4, 8, false, 5000", "1, 5000, 128, 4, 8, false, 5000"})
  void compactKeysTakeTheOriginalPlan(int n, int listLen, int d, int group, int nKv, boolean bias, int override) {
    // the compact kernel's only extra shared memory is its d / 2 inverse frequencies: never a buffer less
    assertEquals(ListKernels.plan(n, listLen, d, group, nKv, bias, false, 132, override),
        ListKernels.plan(n, listLen, d, group, nKv, bias, true, 132, override));
    assertEquals(ListKernels.tcSmem(d, 128, 2, false) + d / 2 * 4, ListKernels.tcSmem(d, 128, 2, true));
  }

  @Test
  void longListsPipelineWithinResidentBlocks() {
    // a 128K-entry list on one KV head: splits capped by residency, each warp streams several tiles through its buffers
    ListKernels.Plan p = ListKernels.plan(1, 131072, 128, 16, 1, false, false, 132, 0);
    assertTrue(p.splits() <= 3 * 132, "resident: " + p);
    assertTrue(p.chunk() > 64 * p.stages(), "several rounds per warp: " + p);
    // decode rows multiply the blocks: 8 rows x 8 KV heads still one wave (longer splits, one buffer per warp)
    ListKernels.Plan rows = ListKernels.plan(8, 2688, 128, 4, 8, true, false, 132, 0);
    assertTrue(rows.splits() * 64 <= 3 * 132, "rows resident: " + rows);
    assertEquals(1, rows.stages());
  }

  @Test
  void chunkOverrideRoundsToWholeStepsAndKeepsTheBudget() {
    ListKernels.Plan p = ListKernels.plan(1, 2688, 128, 4, 8, false, false, 132, 100);
    assertEquals(128, p.chunk());
    assertEquals(21, p.splits());
    assertEquals(2, p.stages());
    ListKernels.Plan c = ListKernels.plan(1, 2688, 128, 4, 8, false, true, 132, 192);
    assertEquals(192, c.chunk());
    assertEquals(2, c.stages(), "d = 128: two buffers per warp at most (75 KB), three tiles through them");
    assertEquals(ListKernels.tcChunkMax(64, false), ListKernels.plan(1, 5000, 64, 4, 8, false, false, 132, 5000).chunk(),
        "capped");
    assertEquals(ListKernels.TC_CHUNK_MAX, ListKernels.tcChunkMax(128, true), "compact d = 128: offsets fit 75 KB");
    assertEquals(64, ListKernels.plan(1, 10, 64, 4, 8, false, false, 132, 0).chunk(), "never past the list");
    assertEquals(3, ListKernels.tcStages(64, false, 192));
    assertEquals(2, ListKernels.tcStages(64, true, 128));
    assertEquals(1, ListKernels.tcStages(128, false, 64), "no buffer without a tile");
  }

  @Test
  void rejectsShapesItDoesNotTake() {
    Kernels.KvView d128 = view(8, 128), d48 = view(8, 48), d512 = view(8, 512), d4 = view(1, 4);
    ListKernels.check(d128, 1, 2688, 1, 32, false, null, null, null);
    ListKernels.check(d128, 8, 2688, 2688, 128, false, null, null, null);
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d48, 1, 100, 1, 32, false, null, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d512, 1, 100, 1, 32, false, null, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d4, 1, 100, 1, 4, false, null, null, null));
    assertThrows(IllegalArgumentException.class,
        () -> ListKernels.check(d128, 1, 100, 1, 136, false, null, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 1, 100, 1, 30, false, null, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 1, 100, 0, 32, false, null, null, null));
    assertThrows(IllegalArgumentException.class,
        () -> ListKernels.check(d128, 1, 100, 101, 32, false, null, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 4, 100, 1, 32, false, null, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 1, 100, 1, 32, true, null, null, null));
    // compact keys need the tables (gather, CUDA cores) and their inverse frequencies (tensor-core decode)
    jcuda.driver.CUdeviceptr ptr = new jcuda.driver.CUdeviceptr();
    ListKernels.check(d128, 1, 100, 1, 32, true, ptr, ptr, ptr);
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 1, 100, 1, 32, true, ptr, ptr, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 1, 100, 1, 32, true, null, ptr, ptr));
  }

  private static Kernels.KvView view(int nKv, int d) {
    return new Kernels.KvView(null, null, null, null, nKv, d, Kernels.PAGE_SIZE);
  }
}
