package io.longsieve.cuda.kv;

import io.longsieve.cuda.Gpu;
import io.longsieve.cuda.kernels.Kernels;
/** Reads one layer of a {@link PagedKvCache} back in slot order (slot, nKv, headDim) f32, for tests. */
public final class PagedKvCacheReader {
  private PagedKvCacheReader() {}

  /** {kPre, kRope, v}, each (slots, nKv * headDim). */
  public static float[][] read(Gpu gpu, PagedKvCache kv, int layer, int slots) {
    Kernels.KvView view = kv.layer(layer);
    int per = kv.poolPages() * kv.nKv * kv.pageSize * kv.headDim;
    int[] table = new int[kv.pages];
    gpu.stream.synchronize();
    jcuda.driver.JCudaDriver.cuMemcpyDtoH(jcuda.Pointer.to(table), view.pageTable(), kv.pages * 4L);
    float[][] out = new float[3][slots * kv.nKv * kv.headDim];
    jcuda.driver.CUdeviceptr[] src = {view.kPre(), view.kRope(), view.v()};
    for (int which = 0; which < 3; which++) {
      short[] raw = new short[per];
      jcuda.driver.JCudaDriver.cuMemcpyDtoH(jcuda.Pointer.to(raw), src[which], per * 2L);
      float[] all = Gpu.fromBf16(raw);
      for (int s = 0; s < slots; s++) {
        int page = table[s / kv.pageSize];
        for (int h = 0; h < kv.nKv; h++) {
          int from = ((page * kv.nKv + h) * kv.pageSize + s % kv.pageSize) * kv.headDim;
          System.arraycopy(all, from, out[which], (s * kv.nKv + h) * kv.headDim, kv.headDim);
        }
      }
    }
    return out;
  }
}
