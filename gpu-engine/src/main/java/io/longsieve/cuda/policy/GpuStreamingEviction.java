package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.cuda.kernels.KvCompressKernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.policy.PolicyTerm;
import io.longsieve.policy.SelectionStats;

/**
 * StreamingLLM as KV compression on the GPU (cpu/policy/StreamingLlm.Eviction): after the prompt
 * every layer keeps its first {@code sinks} and last {@code recent} slots, compacted to slots
 * 0..sinks+recent−1; from then on each decode step that overfills the cache evicts the oldest slot
 * after the sinks (the rolling cache), shifting the later slots down by one. Positions as on the
 * CPU: kRope keeps each key's original rotation and new tokens append at slot = length with their
 * own position. (Lives in its own file so GpuStreaming's Window and this part merge independently;
 * GpuStreaming.Eviction is the unused placeholder.) Records no statistics (as the CPU twin).
 * Failure semantics: CUDA errors propagate; compress synchronises once (uploading the keep list).
 */
public final class GpuStreamingEviction implements GpuParts.Kv {

  private final int sinks, recent;
  private final GpuEnv env;
  private final KvCompressKernels kk;
  private final GpuKvCompress.Scratch scratch;  // kept across decode steps: the rolling shift reuses it

  GpuStreamingEviction(PolicyTerm t, SelectionStats stats, GpuEnv env) {
    sinks = t.intParam("sinks");
    recent = t.intParam("recent");
    this.env = env;
    kk = new KvCompressKernels(env.k());
    scratch = new GpuKvCompress.Scratch(env.ctx());
  }

  /** keep (nKv, sinks + recent) of a layer of n slots: 0..sinks−1 then n−recent..n−1, for every KV head. */
  public static int[] keepList(int sinks, int recent, int n, int nKv) {
    int count = sinks + recent;
    int[] keep = new int[nKv * count];
    for (int g = 0; g < nKv; g++) {
      for (int i = 0; i < sinks; i++) keep[g * count + i] = i;
      for (int i = 0; i < recent; i++) keep[g * count + sinks + i] = n - recent + i;
    }
    return keep;
  }

  @Override
  public void compress(PagedKvCache kv) {
    int count = sinks + recent;
    try (DeviceBuffer keep = env.ctx().alloc((long) kv.nKv * Math.max(1, count) * 4, "StreamingLLM keep list")) {
      int uploadedFor = -1;
      for (int l = 0; l < kv.layers; l++) {
        int n = kv.length(l);
        if (count >= n || env.config().window(l) > 0) continue;  // sliding-window layers stay whole (GpuPolicy)
        if (n != uploadedFor) {
          env.k().stream().synchronize();  // the previous layer's compaction may still read the list
          keep.upload(keepList(sinks, recent, n, kv.nKv));
          uploadedFor = n;
        }
        GpuKvCompress.retain(kv, l, keep.ptr(), count, kk, scratch, 0);
      }
      env.k().stream().synchronize();  // before the list is freed
    }
    kv.shrink();
  }

  @Override
  public boolean afterDecode(LayerCall c, PagedKvCache kv) {
    int layer = c.layer(), n = kv.length(layer);
    if (n <= sinks + recent) return false;
    int rows = n - 1 - sinks;  // slots sinks+1 .. n−1 move down by one
    Kernels.KvView view = kv.layer(layer);
    kk.compact(view, kv.nHeads, scratch.get(0, KvCompressKernels.compactScratchBytes(rows, kv.nKv, kv.nHeads,
        kv.headDim)), null, 0, sinks, sinks, n - 1, n);
    kv.setLength(layer, n - 1);
    return true;
  }

  @Override
  public void close() {
    scratch.close();
  }
}
