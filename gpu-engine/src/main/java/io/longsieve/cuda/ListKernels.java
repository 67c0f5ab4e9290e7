package io.longsieve.cuda;

import jcuda.driver.CUdeviceptr;

/**
 * SIGNATURES ONLY: a compiling copy of the API helper "list-attn" implements (attention over
 * selected index lists). Its branch replaces this file when merged; every method throws until then.
 */
public final class ListKernels implements AutoCloseable {

  public ListKernels(Kernels k, CudaContext ctx) {}

  /**
   * out (n, nHeads, headDim) bf16 = attention of q (n, nHeads, headDim) bf16 over the lists
   * (nLists, listLen) int (nLists 1 or nKv); row i sees list entries [0, listLen - n + i + 1).
   * compact: keys kPre rotated at their list index via ropeCos/ropeSin (positions, headDim / 2) f32;
   * otherwise keys kRope at the slots.
   */
  public void attend(CUdeviceptr out, CUdeviceptr q, Kernels.KvView kv, CUdeviceptr lists, int nLists, int listLen,
                     int n, int nHeads, boolean compact, CUdeviceptr ropeCos, CUdeviceptr ropeSin, float scale) {
    throw new UnsupportedOperationException("ListKernels lands with the list-attn branch");
  }

  /** cos, sin (positions, half) f32 = RoPE tables of positions 0 .. positions - 1 (model/Rope's math). */
  public void ropeTable(CUdeviceptr cos, CUdeviceptr sin, CUdeviceptr invFreq, int positions, int half) {
    throw new UnsupportedOperationException("ListKernels lands with the list-attn branch");
  }

  @Override
  public void close() {}
}
