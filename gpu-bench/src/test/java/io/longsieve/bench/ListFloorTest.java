package io.longsieve.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.longsieve.cuda.GpuTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.DeviceCaches;
import io.longsieve.cuda.kernels.Kernels;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * ListFloor (list_floor.cu) against its definition on the host: every block's u32 is the sum of the words of
 * exactly its entries' K and V rows, read through a shuffled page table (or, for physical slots, none), for grids
 * with one and several lookup and copy rounds, ragged last blocks and empty ones.
 */
@Tag("gpu")
class ListFloorTest extends GpuTest {

  @ParameterizedTest(name = "d={0} nKv={1} list={2} of {3} slots, {4} blocks x {5} threads")
  @CsvSource({
      // the decode plan's grid; one copy round with 512 threads; two rounds (8 blocks of 336 entries); many blocks
      "128, 8, 2688, 6000, 21, 128", "128, 8, 2688, 6000, 21, 512", "128, 8, 2688, 6000, 8, 512",
      "128, 8, 2688, 6000, 64, 256",
      // ragged: 143 entries a block (odd: the stage starts past padding), the last 142
      "128, 2, 1000, 3000, 7, 256",
      // 5 entries a block: 60 blocks hold the list, 4 are empty
      "128, 1, 300, 1000, 64, 512",
      "64, 4, 777, 3000, 5, 128", "64, 8, 2688, 9000, 16, 32",
      // 1500 entries a block: three lookup rounds of 4 x 128, five copy rounds
      "64, 1, 3000, 4000, 2, 128"})
  void everyBlockSumsExactlyItsRows(int d, int nKv, int listLen, int slots, int blocks, int threads) {
    run(d, nKv, listLen, slots, blocks, threads, false);
  }

  /** Physical slots: the page table is not read, page p of the list's slots is pool page p. */
  @ParameterizedTest(name = "physical: d={0} nKv={1} list={2} of {3} slots, {4} blocks x {5} threads")
  @CsvSource({"128, 8, 2688, 6000, 32, 256", "64, 2, 1000, 3000, 7, 128"})
  void physicalSlotsSkipThePageTable(int d, int nKv, int listLen, int slots, int blocks, int threads) {
    run(d, nKv, listLen, slots, blocks, threads, true);
  }

  private static void run(int d, int nKv, int listLen, int slots, int blocks, int threads, boolean physical) {
    Random r = new Random(d * 31L + nKv * 7L + listLen + blocks * 1009L + threads);
    int pages = DeviceCaches.pages(slots, 3);
    int[] table = DeviceCaches.shuffledTable(r, pages);  // poisoned below for physical slots: must not be read
    int elems = pages * nKv * Kernels.PAGE_SIZE * d;
    short[] kPre = randomShorts(r, elems), kRope = randomShorts(r, elems), v = randomShorts(r, elems);
    int[] list = new int[listLen];  // any slots, repeats and disorder included; the last slot always
    for (int i = 0; i < listLen; i++) list[i] = r.nextInt(slots);
    list[listLen / 2] = slots - 1;

    int[] identity = new int[pages];
    for (int i = 0; i < pages; i++) identity[i] = i;
    int[] poison = new int[pages];
    java.util.Arrays.fill(poison, Integer.MIN_VALUE);
    Kernels.KvView view = new Kernels.KvView(upload(kPre), upload(kRope), upload(v),
        gpu.ints(physical ? poison : table).ptr(), nKv, d, Kernels.PAGE_SIZE);
    DeviceBuffer out = gpu.poisoned((long) nKv * blocks * 4, false);
    try (ListFloor floor = new ListFloor(gpu.k)) {
      floor.gather(out.ptr(), view, gpu.ints(list).ptr(), listLen, blocks, threads, physical);
      gpu.stream.synchronize();
    }
    int[] got = out.downloadInts(nKv * blocks);
    assertArrayEquals(expected(kRope, v, physical ? identity : table, list, nKv, d, Kernels.PAGE_SIZE, blocks), got,
        "per-block sums of " + blocks + " blocks x " + threads + " threads, physical " + physical);
  }

  /**
   * What list_gather_floor writes: for KV head g and block b, the sum (mod 2^32) of the little-endian u32 words
   * (element 2i in the low half) of the K and V rows (d bf16 each, layout (page, nKv, pageSize, d)) at slots
   * list[e] for e in [b * chunk, min(listLen, b * chunk + chunk)).
   */
  static int[] expected(short[] k, short[] v, int[] table, int[] list, int nKv, int d, int pageSize, int blocks) {
    int chunk = ListFloor.chunk(list.length, blocks);
    int[] sums = new int[nKv * blocks];
    for (int g = 0; g < nKv; g++) {
      for (int b = 0; b < blocks; b++) {
        int s = 0;
        for (int e = b * chunk; e < Math.min(list.length, b * chunk + chunk); e++) {
          int slot = list[e];
          long off = (((long) table[slot / pageSize] * nKv + g) * pageSize + slot % pageSize) * d;
          for (int i = 0; i < d; i += 2) {
            s += (k[(int) off + i] & 0xffff) | (k[(int) off + i + 1] << 16);
            s += (v[(int) off + i] & 0xffff) | (v[(int) off + i + 1] << 16);
          }
        }
        sums[g * blocks + b] = s;
      }
    }
    return sums;
  }

  /** Any 16-bit patterns (the floor sums raw words, so NaN and zero patterns are as good as any). */
  static short[] randomShorts(Random r, int n) {
    short[] s = new short[n];
    for (int i = 0; i < n; i++) s[i] = (short) r.nextInt();
    return s;
  }

  private static jcuda.driver.CUdeviceptr upload(short[] s) {
    DeviceBuffer b = gpu.alloc(s.length * 2L);
    b.upload(s);
    return b.ptr();
  }
}
