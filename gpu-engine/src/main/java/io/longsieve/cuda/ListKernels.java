package io.longsieve.cuda;

import jcuda.driver.CUdeviceptr;

/**
 * SIGNATURES-ONLY PLACEHOLDER carried by the baselines branch so GpuStreaming.Window compiles: the
 * real class comes from the list-attn branch (take theirs on merge). Every method throws.
 */
public final class ListKernels implements AutoCloseable {

  public ListKernels(Kernels k, CudaContext ctx) {}

  public void attend(CUdeviceptr out, CUdeviceptr q, Kernels.KvView kv, CUdeviceptr lists, int nLists, int listLen,
                     int n, int nHeads, boolean compact, CUdeviceptr ropeCos, CUdeviceptr ropeSin, float scale) {
    throw new UnsupportedOperationException("ListKernels placeholder: merge the list-attn branch");
  }

  public void ropeTable(CUdeviceptr cos, CUdeviceptr sin, CUdeviceptr invFreq, int positions, int half) {
    throw new UnsupportedOperationException("ListKernels placeholder: merge the list-attn branch");
  }

  @Override
  public void close() {}
}
