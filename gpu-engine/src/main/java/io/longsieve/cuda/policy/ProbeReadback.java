package io.longsieve.cuda.policy;

import static jcuda.driver.JCudaDriver.cuMemcpyDtoH;

import io.longsieve.cuda.driver.CaptureGuard;
import io.longsieve.cuda.kernels.Kernels;
import io.longsieve.model.DType;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/**
 * Device memory read back for {@link io.longsieve.policy.SelectionProbe} reports (diagnostics only:
 * each read synchronises the context and copies synchronously). bf16 values come back widened to f32
 * exactly, so a report carries what the kernels read.
 */
final class ProbeReadback {
  private ProbeReadback() {}

  /** {@code count} bf16 values from {@code src}, widened to f32. */
  static float[] bf16(GpuEnv env, CUdeviceptr src, int count) {
    short[] raw = new short[count];
    try (CaptureGuard.Held sync = CaptureGuard.sync(env.ctx().ordinal())) {
      env.ctx().synchronize();
      cuMemcpyDtoH(Pointer.to(raw), src, count * 2L);
    }
    float[] out = new float[count];
    for (int i = 0; i < count; i++) out[i] = DType.bf16ToFloat(raw[i]);
    return out;
  }

  /** Rows [row0, row0 + rows) of an f32 matrix with {@code stride} floats a row, columns [0, cols). */
  static float[] f32Rows(GpuEnv env, CUdeviceptr src, int stride, int row0, int rows, int cols) {
    float[] row = new float[cols], out = new float[rows * cols];
    try (CaptureGuard.Held sync = CaptureGuard.sync(env.ctx().ordinal())) {
      env.ctx().synchronize();
      for (int r = 0; r < rows; r++) {
        cuMemcpyDtoH(Pointer.to(row), src.withByteOffset(((long) (row0 + r) * stride) * 4), cols * 4L);
        System.arraycopy(row, 0, out, r * cols, cols);
      }
    }
    return out;
  }

  /**
   * Slots [0, slots) of one layer's paged keys in slot order, (slots, nKv, headDim) f32: {@code rope}
   * the keys rotated at their positions (kRope), else the keys before RoPE (kPre). Pages are
   * (poolPage, nKv, pageSize, headDim) bf16, found through the layer's page table.
   */
  static float[] keys(GpuEnv env, Kernels.KvView kv, boolean rope, int slots) {
    int pageSize = kv.pageSize(), nKv = kv.nKv(), d = kv.headDim(), pages = (slots + pageSize - 1) / pageSize;
    int[] table = new int[Math.max(1, pages)];
    try (CaptureGuard.Held sync = CaptureGuard.sync(env.ctx().ordinal())) {
      env.ctx().synchronize();
      cuMemcpyDtoH(Pointer.to(table), kv.pageTable(), pages * 4L);
    }
    CUdeviceptr base = rope ? kv.kRope() : kv.kPre();
    int pageElems = nKv * pageSize * d;
    float[] out = new float[slots * nKv * d];
    for (int p = 0; p < pages; p++) {
      float[] page = bf16(env, base.withByteOffset((long) table[p] * pageElems * 2), pageElems);
      for (int s = p * pageSize; s < Math.min(slots, (p + 1) * pageSize); s++) {
        for (int g = 0; g < nKv; g++) {
          System.arraycopy(page, (g * pageSize + s % pageSize) * d, out, (s * nKv + g) * d, d);
        }
      }
    }
    return out;
  }
}
