package io.longsieve.cuda.kv;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import io.longsieve.cuda.GpuTest;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.DeviceCaches;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Prefix reuse's pages on the device: a kept prefix holds the full pages of the cache that computed
 * it by reference and a copy of the page it ends in; a fork reads the same full pages and its own copy
 * of the last one; appends after the prefix, by the owner or a fork, change nothing the others read;
 * {@link PagedKvCache#unshare} gives a cache pages of its own; every page goes back to the pool.
 */
@Tag("gpu")
class KeptPagesTest extends GpuTest {

  static final ModelConfig C = DeviceCaches.config(2, 4, 2, 64, 0);
  static final int KV_DIM = 2 * 64;

  @Test
  void forksShareFullPagesAndCopyThePartialOne() {
    Random r = new Random(3);
    DeviceBuffer invFreq = gpu.f32(new Rope(C).inverseFrequencies());
    int prefix = 150; // two full pages of 64 and 22 slots of a third
    try (KvPagePool pool = new KvPagePool(gpu.ctx, C, 24)) {
      PagedKvCache owner = new PagedKvCache(gpu.ctx, C, 300, pool);
      append(owner, r, prefix, invFreq);
      float[][][] before = read(owner, prefix);
      KeptPages kept = owner.keep(prefix, gpu.stream);
      assertEquals(2, pool.holders(pageOf(owner, 0)));         // the owner and the kept prefix
      assertEquals(2, pool.holders(pageOf(owner, 1)));
      assertEquals(1, pool.holders(pageOf(owner, 2)));         // the kept prefix copied the partial page
      append(owner, r, 20, invFreq);                          // the owner writes into its own partial page
      float[][][] ownerAfter = read(owner, prefix + 20);
      PagedKvCache fork = PagedKvCache.fork(gpu.ctx, C, 300, kept, gpu.stream);
      assertEquals(prefix, fork.length(0));
      assertEquals(3, pool.holders(pageOf(fork, 0)));           // owner, kept, fork
      assertEquals(pageOf(owner, 1), pageOf(fork, 1));
      assertNotEquals(pageOf(owner, 2), pageOf(fork, 2));       // the partial page is the fork's own
      append(fork, r, 30, invFreq);
      float[][][] forkRead = read(fork, prefix + 30);
      float[][][] ownerRead = read(owner, prefix + 20);
      for (int l = 0; l < C.numLayers(); l++) {
        for (int which = 0; which < 3; which++) {
          assertArrayEquals(before[l][which], slice(forkRead[l][which], prefix), "the fork's prefix, layer " + l);
          assertArrayEquals(ownerAfter[l][which], ownerRead[l][which], "the owner's slots, layer " + l);
        }
      }
      owner.close();                                            // the fork and the kept prefix still read its pages
      PagedKvCache second = PagedKvCache.fork(gpu.ctx, C, 300, kept, gpu.stream);
      float[][][] secondRead = read(second, prefix);
      for (int l = 0; l < C.numLayers(); l++) {
        for (int which = 0; which < 3; which++) {
          assertArrayEquals(before[l][which], secondRead[l][which], "second fork, layer " + l);
        }
      }
      kept.close();
      fork.unshare(gpu.stream);                                 // as before compression: nothing shared now
      assertEquals(1, pool.holders(pageOf(fork, 0)));
      assertEquals(1, pool.holders(pageOf(second, 0)));
      float[][][] unshared = read(fork, prefix + 30);
      for (int l = 0; l < C.numLayers(); l++) {
        for (int which = 0; which < 3; which++) assertArrayEquals(forkRead[l][which], unshared[l][which]);
      }
      fork.close();
      second.close();
      assertEquals(pool.pages, pool.freePages());
    }
  }

  private static int pageOf(PagedKvCache kv, int logical) {
    int[] table = new int[kv.pages];
    gpu.stream.synchronize();
    jcuda.driver.JCudaDriver.cuMemcpyDtoH(jcuda.Pointer.to(table), kv.layer(0).pageTable(), kv.pages * 4L);
    return table[logical];
  }

  /** n random tokens appended to every layer at the cache's end (positions = slots). */
  private static void append(PagedKvCache kv, Random r, int n, DeviceBuffer invFreq) {
    kv.reserve(n);
    for (int l = 0; l < C.numLayers(); l++) {
      int before = kv.length(l);
      float[] k = new float[n * KV_DIM], v = new float[n * KV_DIM];
      for (int i = 0; i < k.length; i++) {
        k[i] = (float) r.nextGaussian();
        v[i] = (float) r.nextGaussian();
      }
      DeviceCaches.append(gpu, kv.layer(l), k, v, n, KV_DIM, before, before, invFreq);
      kv.advance(l, n);
    }
  }

  /** (layer) → {kPre, kRope, v} of slots [0, slots). */
  private static float[][][] read(PagedKvCache kv, int slots) {
    float[][][] out = new float[C.numLayers()][][];
    for (int l = 0; l < C.numLayers(); l++) out[l] = PagedKvCacheReader.read(gpu, kv, l, slots);
    return out;
  }

  private static float[] slice(float[] a, int slots) {
    return java.util.Arrays.copyOf(a, slots * KV_DIM);
  }
}
