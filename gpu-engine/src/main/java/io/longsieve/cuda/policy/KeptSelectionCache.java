package io.longsieve.cuda.policy;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.DeviceBuffer;

/**
 * TokenSelect's Selection Cache as a kept prompt prefix carries it to its forks ({@link GpuTokenSelect#keepState}):
 * device copies, freed on close.
 *
 * @param fingerprints (layer, heads, headDim) f32 fingerprints the cached top-k were scored with
 * @param tops         (layer) → (lists, counts[layer]) int cached top-k, null where the layer had none
 * @param counts       (layer) top-k per list of each layer's cached entry
 */
record KeptSelectionCache(CudaContext ctx, DeviceBuffer fingerprints, DeviceBuffer[] tops, int[] counts)
    implements GpuParts.KeptState {
  @Override
  public long bytes() {
    long b = fingerprints.bytes();
    for (DeviceBuffer t : tops) if (t != null) b += t.bytes();
    return b;
  }

  @Override
  public void close() {
    ctx.synchronize(); // a fork's queued copy may still read them
    fingerprints.close();
    for (DeviceBuffer t : tops) if (t != null) t.close();
  }
}
