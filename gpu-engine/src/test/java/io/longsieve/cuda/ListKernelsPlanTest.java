package io.longsieve.cuda;

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
    ListKernels.Plan p = ListKernels.plan(n, listLen, d, group, nKv, bias, 132);
    assertTrue(p.path() != ListKernels.Path.GATHER_PREFILL, "bias or few rows never gather: " + p);
    assertEquals(0, p.chunk() % 64, "whole 64-entry steps");
    assertTrue((long) p.chunk() * p.splits() >= listLen, "every entry is in a split");
    assertTrue((long) p.chunk() * (p.splits() - 1) < listLen, "no split is empty for the last row");
    if (p.path() == ListKernels.Path.TC_DECODE) {
      assertTrue(p.chunk() <= ListKernels.TC_CHUNK_MAX);
      assertTrue(ListKernels.tcSmem(d, p.chunk()) <= SMEM_LIMIT, "tensor-core smem " + ListKernels.tcSmem(d, p.chunk()));
      // the warps' merge reuses the K/V buffers: (warps, 16, d) f32 + (warps, 16) max and sum
      int kvBytes = ListKernels.tcKvBytes(d);
      assertTrue(ListKernels.TC_WARPS * 16 * (d + 2) * 4 <= kvBytes, "merge fits the K/V buffers");
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

  @Test
  void llamaDecodeFillsTheGpu() {
    // 8B shapes: a 2688-entry list over 8 KV heads must still give (nearly) every multiprocessor work
    ListKernels.Plan p = ListKernels.plan(1, 2688, 128, 4, 8, false, 132);
    assertTrue(p.splits() * 8 >= 100, "about one block per multiprocessor: " + p);
    // and three of its blocks (the kernel's launch bound) fit one H200 multiprocessor's 228 KB (1 KB reserved each)
    assertTrue(3 * (ListKernels.tcSmem(128, p.chunk()) + 1024) <= 228 * 1024, "three blocks resident: " + p);
  }

  @Test
  void rejectsShapesItDoesNotTake() {
    Kernels.KvView d128 = view(8, 128), d48 = view(8, 48), d512 = view(8, 512), d4 = view(1, 4);
    ListKernels.check(d128, 1, 2688, 1, 32, false, null, null);
    ListKernels.check(d128, 8, 2688, 2688, 128, false, null, null);
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d48, 1, 100, 1, 32, false, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d512, 1, 100, 1, 32, false, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d4, 1, 100, 1, 4, false, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 1, 100, 1, 136, false, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 1, 100, 1, 30, false, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 1, 100, 0, 32, false, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 1, 100, 101, 32, false, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 4, 100, 1, 32, false, null, null));
    assertThrows(IllegalArgumentException.class, () -> ListKernels.check(d128, 1, 100, 1, 32, true, null, null));
  }

  @ParameterizedTest
  @CsvSource({"2688", "2689", "32768", "131072"})
  void benchListsAreSortedDistinctSlotsOfTheContext(int context) {
    int[] l = ListAttentionBench.list(new java.util.Random(context), context);
    assertEquals(ListAttentionBench.LIST, l.length);
    assertEquals(0, l[0]);
    assertEquals(context - 1, l[l.length - 1], "the window ends at the last slot");
    for (int i = 1; i < l.length; i++) assertTrue(l[i] > l[i - 1], "strictly ascending at " + i);
  }

  private static Kernels.KvView view(int nKv, int d) {
    return new Kernels.KvView(null, null, null, null, nKv, d, Kernels.PAGE_SIZE);
  }
}
