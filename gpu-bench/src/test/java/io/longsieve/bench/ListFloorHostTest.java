package io.longsieve.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.longsieve.cuda.kernels.KernelDefines;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** ListFloor's host side (grid split, shared memory) and ListFloorTest's host reference: runs without a GPU. */
class ListFloorHostTest {

  @ParameterizedTest(name = "d={0} list={1} blocks={2}")
  @CsvSource({"128, 2688, 8", "128, 2688, 16", "128, 2688, 21", "128, 2688, 32", "128, 2688, 64", "64, 2688, 8",
      "128, 1000, 7", "128, 300, 64", "64, 3000, 2", "128, 4096, 1", "64, 1, 1"})
  void chunksCoverTheListAndFitSharedMemory(int d, int listLen, int blocks) {
    ListFloor.check(d, listLen, blocks, 128);
    int chunk = ListFloor.chunk(listLen, blocks), stage = ListFloor.stage(d, chunk);
    assertTrue((long) chunk * blocks >= listLen && (long) (chunk - 1) * blocks < listLen, "the least covering chunk");
    assertTrue(stage >= 1 && stage <= chunk * 2 * (d / 8), "stage " + stage);
    assertTrue(ListFloor.smem(chunk, stage) <= ListFloor.SMEM_BUDGET, "smem " + ListFloor.smem(chunk, stage));
    assertEquals(0, ListFloor.offsetBytes(chunk) % 16, "the stage is 16-byte aligned");
    assertTrue(ListFloor.offsetBytes(chunk) >= chunk * 8, "offsets fit");
  }

  @Test
  void theDecodeListStagesInOneRoundFrom16Blocks() {
    // 2688 entries at d = 128: 168 or fewer per block copy in one round, 336 (8 blocks) in two
    assertEquals(168 * 32, ListFloor.stage(128, ListFloor.chunk(2688, 16)));
    assertEquals(2, (336 * 32 + ListFloor.stage(128, 336) - 1) / ListFloor.stage(128, 336));
  }

  @Test
  void threadLimitIsTheKernels() throws java.io.IOException {
    assertEquals(ListFloor.MAX_THREADS, KernelDefines.of("list_floor.cu", "LF_MAX_THREADS"));
  }

  @Test
  void rejectsShapesTheKernelDoesNotTake() {
    assertThrows(IllegalArgumentException.class, () -> ListFloor.check(96, 100, 4, 128));
    assertThrows(IllegalArgumentException.class, () -> ListFloor.check(128, 100, 4, 100));
    assertThrows(IllegalArgumentException.class, () -> ListFloor.check(128, 100, 4, 1024));
    assertThrows(IllegalArgumentException.class, () -> ListFloor.check(128, 100, 0, 128));
    assertThrows(IllegalArgumentException.class, () -> ListFloor.check(128, 0, 4, 128));
    assertThrows(IllegalArgumentException.class, () -> ListFloor.check(128, ListFloor.MAX_CHUNK + 1, 1, 128));
  }

  @Test
  void referenceSumsLittleEndianWordsOfEachBlocksRows() {
    // d = 2, two KV heads, page size 2, pages swapped: slot s of head g at ((table[s / 2] * 2 + g) * 2 + s % 2) * 2
    int d = 2, nKv = 2, ps = 2;
    int[] table = {1, 0};
    short[] k = new short[2 * nKv * ps * d], v = new short[k.length];
    for (int i = 0; i < k.length; i++) {
      k[i] = (short) (i + 1);
      v[i] = (short) (0x8000 + i);
    }
    int[] list = {3, 0, 3};  // 2 blocks: entries {3, 0} and {3}
    int[] want = new int[4];
    for (int g = 0; g < nKv; g++) {
      for (int e = 0; e < 3; e++) {
        int slot = list[e], off = ((table[slot / ps] * nKv + g) * ps + slot % ps) * d;
        int kWord = (k[off] & 0xffff) | (k[off + 1] & 0xffff) << 16;
        int vWord = (v[off] & 0xffff) | (v[off + 1] & 0xffff) << 16;
        want[g * 2 + (e < 2 ? 0 : 1)] += kWord + vWord;
      }
    }
    assertArrayEquals(want, ListFloorTest.expected(k, v, table, list, nKv, d, ps, 2));
    assertEquals(0, ListFloorTest.expected(k, v, table, list, nKv, d, ps, 4)[3], "an empty block sums nothing");
  }
}
