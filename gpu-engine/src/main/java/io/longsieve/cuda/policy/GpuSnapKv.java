package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;
import jcuda.driver.CUdeviceptr;

/**
 * SnapKV on the GPU: what cpu/policy/SnapKv computes, per layer on the device. The last
 * {@code window} prompt queries vote on the prefix (softmax probabilities summed over the window and
 * over a KV head's query heads), the votes are avg-pooled, each KV head keeps its top capacity −
 * window prefix slots (ties to the lower slot) plus the window, compacted to slots 0..capacity−1.
 * Nothing is merged. Records no statistics of its own (as the CPU twin). Failure semantics: CUDA
 * errors propagate; compress synchronises once per layer (it reads the list sizes back).
 */
public final class GpuSnapKv extends GpuObservedKv {

  private final int pool, capacity;
  private final double ratio;

  public GpuSnapKv(PolicyTerm t, SelectionStats stats, GpuEnv env) {
    super(Math.max(1, t.intParam("window")), env);
    pool = t.intParam("pool");
    capacity = t.intParam("capacity");
    ratio = t.doubleParam("ratio");
  }

  /** Slots kept per KV head for a layer of n slots with win observed rows (n or more: nothing dropped). */
  public static int capacity(double ratio, int capacity, int win, int n) {
    int cap = ratio > 0 ? (int) Math.round(ratio * n) : capacity;
    return Math.max(cap, win);
  }

  @Override
  protected void compressLayer(int layer, PagedKvCache kv, GpuKvCompress.Scratch s, DeviceBuffer counts) {
    int n = kv.length(layer), win = observed(layer);
    int cap = capacity(ratio, capacity, win, n);
    if (n <= cap) return;
    Kernels.KvView view = kv.layer(layer);
    CUdeviceptr attn = obs.attention(layer, view, n, env, kk, s);  // (heads, n), slots 0..3
    int prefix = n - win, pick = cap - win;
    CUdeviceptr vote = s.get(4, (long) nKv * prefix * 4);                       // (nKv, prefix)
    CUdeviceptr pooled = pool > 1 ? s.get(5, (long) nKv * prefix * 4) : vote;  // (nKv, prefix)
    CUdeviceptr flags = s.get(6, (long) nKv * prefix);                          // (nKv, prefix) u8
    CUdeviceptr keep = s.get(7, (long) nKv * cap * 4);                          // (nKv, cap) int
    kk.groupSum(vote, attn, n, prefix, nKv, group);
    if (pool > 1) kk.avgPool(pooled, vote, nKv, prefix, pool);
    kk.topkFlags(flags, prefix, pooled, prefix, nKv, prefix, pick);
    kk.lists(keep, cap, null, 1, counts.ptr(), flags, prefix, nKv, n, 0, prefix);
    checkCounts(counts, cap, n - cap);
    retain(kv, layer, keep, cap, s);
  }
}
