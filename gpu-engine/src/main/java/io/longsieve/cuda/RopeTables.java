package io.longsieve.cuda;

import io.longsieve.cuda.driver.CudaContext;
import io.longsieve.cuda.driver.CudaStream;
import io.longsieve.cuda.driver.DeviceBuffer;
import io.longsieve.model.LayerKind;
import io.longsieve.model.ModelConfig;
import io.longsieve.model.Rope;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/**
 * Each layer's RoPE table on the device, one buffer per layer kind ((headDim / 2) f32, model/Rope's
 * deviceInverseFrequencies: partial rotary as zero frequencies, see {@link QkLayout}). For dynamic
 * NTK and LongRoPE, {@link #useLength} rewrites a kind's buffer with the table of the call about to
 * run, queued on the stream ahead of its kernels, so a captured decode step that reads the buffer
 * replays with the right table. Closed with the model.
 */
final class RopeTables implements AutoCloseable {

  private final DeviceBuffer[] byLayer;              // (layers) the buffer of the layer's kind
  private final Map<LayerKind, Rope> bases = new LinkedHashMap<>();
  private final Map<LayerKind, DeviceBuffer> buffers = new LinkedHashMap<>();
  private final Map<Rope, Rope> current = new IdentityHashMap<>();  // base → the table its buffer holds
  private final List<float[]> inFlight = new ArrayList<>();          // uploads queued and not yet synchronised
  private final boolean byLength;
  private final DeviceBuffer full;                   // the full-attention layers' (policies see only those)

  RopeTables(ModelConfig c, CudaContext ctx) {
    byLayer = new DeviceBuffer[c.numLayers()];
    boolean any = false;
    DeviceBuffer f = null;
    try {
      for (int l = 0; l < c.numLayers(); l++) {
        LayerKind kind = c.layerKind(l);
        if (!buffers.containsKey(kind)) {
          Rope base = Rope.forLayer(c, l);
          DeviceBuffer b = ctx.alloc(c.headDim() / 2 * 4L, "rope table");
          buffers.put(kind, b);
          bases.put(kind, base);
          b.upload(base.deviceInverseFrequencies());
          current.put(base, base);
          any |= base.dependsOnLength();
        }
        byLayer[l] = buffers.get(kind);
        if (f == null && !kind.sliding()) f = byLayer[l];
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
    this.byLength = any;
    this.full = f != null ? f : byLayer[0];
  }

  /** Layer l's table. */
  CUdeviceptr layer(int l) {
    return byLayer[l].ptr();
  }

  /** The full-attention layers' table, the one GPU policies rotate with. */
  CUdeviceptr full() {
    return full.ptr();
  }

  /** Whether some table follows each call's length (dynamic NTK, LongRoPE). */
  boolean dependsOnLength() {
    return byLength;
  }

  /**
   * Makes every table the one for a call reaching {@code length} positions (a no-op unless a
   * scaling depends on length, and for a kind whose table does not change): the copies are queued
   * on the stream, after the work already queued and before the call's kernels.
   */
  void useLength(int length, CudaStream stream) {
    if (!byLength) return;
    for (Map.Entry<LayerKind, Rope> e : bases.entrySet()) {
      Rope base = e.getValue(), want = base.atLength(length);
      if (current.get(base) == want) continue;
      float[] table = want.deviceInverseFrequencies();
      inFlight.add(table);  // pageable memory: the copy has taken it by the time the call returns; kept anyway
      stream.copyToDevice(buffers.get(e.getKey()), 0, Pointer.to(table), table.length * 4L);
      current.put(base, want);
    }
    if (inFlight.size() > 64) inFlight.subList(0, inFlight.size() - 8).clear();
  }

  @Override
  public void close() {
    buffers.values().forEach(DeviceBuffer::close);
  }
}
