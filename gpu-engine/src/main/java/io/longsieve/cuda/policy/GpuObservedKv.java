package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.cuda.kernels.KvCompressKernels;
import io.longsieve.cuda.kv.PagedKvCache;
import io.longsieve.model.ModelConfig;
import jcuda.driver.CUdeviceptr;

/**
 * What SelKV and SnapKV share on the GPU: both record the last {@code window} prompt queries
 * (GpuKvCompress.Observation), and after the prompt compress each layer once, on its own, with one
 * scratch set and one list-count buffer, then give the freed pages back. The subclasses hold the
 * algorithm (compressLayer). Failure semantics: CUDA errors propagate from the call that queued the
 * work; compress synchronises once per layer (compressLayer reads the list sizes back).
 */
abstract class GpuObservedKv implements GpuParts.Kv {

  protected final int window;
  protected final GpuEnv env;
  protected final KvCompressKernels kk;
  protected final GpuKvCompress.Observation obs;
  protected final int nKv, group;

  /** window: the observation window, at least 1. */
  GpuObservedKv(int window, GpuEnv env) {
    ModelConfig c = env.config();
    this.window = window;
    this.env = env;
    kk = new KvCompressKernels(env.k());
    nKv = c.numKvHeads();
    group = c.group();
    obs = new GpuKvCompress.Observation(window, c, env.ctx());
  }

  /**
   * Compacts one layer in place (or leaves it when nothing is dropped). s: scratch slots 0..3 hold
   * the observation attention, 20 the compaction; counts: (nKv, 2) int kept / dropped per KV head.
   */
  protected abstract void compressLayer(int layer, PagedKvCache kv, GpuKvCompress.Scratch s, DeviceBuffer counts);

  /** The observed rows of a layer the scores use: the window, or fewer for a shorter prompt. */
  protected final int observed(int layer) {
    return Math.min(window, obs.count(layer));
  }

  /** Fails unless every KV head's lists hold kept and dropped slots (synchronises: reads them back). */
  protected final void checkCounts(DeviceBuffer counts, int kept, int dropped) {
    GpuKvCompress.checkCounts(env, counts, nKv, kept, dropped);
  }

  /** Moves each KV head's kept slots keep (nKv, kept) int to slots 0..kept−1 (scratch slot 20). */
  protected final void retain(PagedKvCache kv, int layer, CUdeviceptr keep, int kept, GpuKvCompress.Scratch s) {
    GpuKvCompress.retain(kv, layer, keep, kept, kk, s, 20, obs.posOffset(layer));
  }

  @Override
  public void observe(LayerCall c) {
    obs.observe(c, kk);
  }

  @Override
  public void compress(PagedKvCache kv) {
    try (GpuKvCompress.Scratch s = new GpuKvCompress.Scratch(env.ctx());
         DeviceBuffer counts = env.ctx().alloc(nKv * 2L * 4, "KV list counts")) {
      for (int l = 0; l < kv.layers; l++) {
        if (env.config().window(l) > 0) continue;  // a sliding-window layer stays whole (GpuPolicy)
        compressLayer(l, kv, s, counts);
      }
    }
    kv.shrink();
  }

  @Override
  public void close() {
    obs.close();
  }
}
