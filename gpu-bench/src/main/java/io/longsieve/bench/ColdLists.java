package io.longsieve.bench;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.model.ModelConfig;
import java.util.Random;
import jcuda.driver.CUdeviceptr;

/**
 * What a decode step's list attention really reads, for the benches: {@link #ROTATE} layers of a random
 * paged cache of the model's shapes at one context, each with its own lists (ListAttentionBench.list per
 * KV head: 128 sinks, 2048 random middle slots, the 512-slot window). A timed body that moves to the next
 * (layer, lists) on every call finds none of its K/V rows in L2: 10 x 11 MB at Llama-3.1-8B shapes is
 * more than twice the H200's 50 MB L2, and no two pairs share a row (other layers), so the rows come from
 * HBM as after a step's scoring pass, where timing one list over and over would read them from L2.
 *
 * <p>Failure semantics: a context beyond the device memory throws from the allocation (nothing is left
 * allocated). Owns device memory: close it.
 */
final class ColdLists implements AutoCloseable {
  /** (layer, lists) pairs a body rotates over. */
  static final int ROTATE = 10;

  private final PagedKvCache kv;   // ROTATE layers at the context, random bf16 keys (both kinds) and values
  private final DeviceBuffer lists; // (ROTATE, nKv, LIST) int on device: pair i's lists, one per KV head
  private final Kernels.KvView[] views; // (ROTATE) the layers' views, made once (no allocation per call)
  private final CUdeviceptr[] listPtrs; // (ROTATE) pair i's lists
  private final int nKv;
  private int next;

  /** Random caches and lists for context L (at least ListAttentionBench.LIST slots); seed picks the lists. */
  ColdLists(CudaContext ctx, Kernels k, ModelConfig c, int L, long seed) {
    int len = ListAttentionBench.LIST;
    if (L < len) throw new IllegalArgumentException("context " + L + " below the " + len + "-entry list");
    nKv = c.numKvHeads();
    ModelConfig layers = Bench.withLayers(c, ROTATE);
    kv = new PagedKvCache(ctx, layers, L);
    try {
      lists = ctx.alloc((long) ROTATE * nKv * len * 4, "cold bench lists");
    } catch (RuntimeException e) {
      kv.close();
      throw e;
    }
    views = new Kernels.KvView[ROTATE];
    listPtrs = new CUdeviceptr[ROTATE];
    for (int i = 0; i < ROTATE; i++) {
      views[i] = kv.layer(i);
      listPtrs[i] = lists.at((long) i * nKv * len * 4);
    }
    try {
      fill(k, c.headDim(), L, seed);
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /** Random keys (both kinds) and values in every layer, and ROTATE x nKv random lists of context L. */
  private void fill(Kernels k, int d, int L, long seed) {
    int len = ListAttentionBench.LIST;
    long elems = (long) kv.pages * nKv * kv.pageSize * d;
    Random r = new Random(seed);
    int[] all = new int[ROTATE * nKv * len];
    for (int i = 0; i < ROTATE; i++) {
      fillRandomKv(k, views[i], elems, 100 + 3L * i);
      for (int g = 0; g < nKv; g++) System.arraycopy(ListAttentionBench.list(r, L), 0, all, (i * nKv + g) * len, len);
    }
    k.stream().synchronize();
    lists.upload(all);
  }

  /** The index of the pair the next call should use (0, 1, ..., ROTATE - 1, 0, ...). */
  int advance() {
    int i = next;
    next = (next + 1) % ROTATE;
    return i;
  }

  /** Layer i's view of the cache. */
  Kernels.KvView view(int i) {
    return views[i];
  }

  /** Pair i's lists (nKv, LIST) int; a shared-list call reads the first. */
  CUdeviceptr lists(int i) {
    return listPtrs[i];
  }

  /** K and V bytes one call over one list reads at these shapes. */
  static double listBytes(ModelConfig c) {
    return 2.0 * ListAttentionBench.LIST * c.numKvHeads() * c.headDim() * 2;
  }

  @Override
  public void close() {
    lists.close();
    kv.close();
  }

  /** elems of a view's pre-RoPE keys, rotated keys and values, as Kernels.fillRandomBf16 at seeds seed, seed + 1, seed + 2. */
  static void fillRandomKv(Kernels k, Kernels.KvView v, long elems, long seed) {
    k.fillRandomBf16(v.kPre(), elems, seed, 1f);
    k.fillRandomBf16(v.kRope(), elems, seed + 1, 1f);
    k.fillRandomBf16(v.v(), elems, seed + 2, 1f);
  }
}
