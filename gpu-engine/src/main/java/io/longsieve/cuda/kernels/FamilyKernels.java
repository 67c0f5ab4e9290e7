package io.longsieve.cuda.kernels;

import io.longsieve.cuda.driver.Launcher;
import jcuda.driver.CUdeviceptr;

/**
 * Launches of the kernels some families add to Llama's layer (elementwise/family.cu): the per-head
 * q/k RMSNorm, GeGLU-tanh, an RMSNorm added into the residual, scaling and soft-capping. Shapes are
 * in the parameter names; everything is queued on the engine's stream. CPU twins:
 * cpu/kernels/FamilyOps (and CpuOps.rmsNorm); parity: FamilyKernelsParityTest.
 */
public final class FamilyKernels {

  private final Launcher l;

  public FamilyKernels(Kernels k) {
    this.l = k.launcher();
  }

  /**
   * In place on n rows of qkv (rows of stride f32): an RMSNorm over each of the nQ query heads (at
   * offset 0) times wq (headDim f32) and each of the nK key heads (from kOff) times wk.
   */
  public void qkNorm(CUdeviceptr qkv, int stride, int n, int nQ, int nK, int kOff, int headDim, CUdeviceptr wq,
                     CUdeviceptr wk, double eps) {
    l.launch("qk_norm_rows", n, nQ + nK, 1, 128, 0, qkv, stride, nQ, nK, kOff, headDim, wq, wk, eps);
  }

  /** out (n, hidden) bf16 = gelu_tanh(gate) * up, gu (n, 2 * hidden) bf16 holding [gate | up]. */
  public void geglu(CUdeviceptr out, CUdeviceptr gu, int n, int hidden) {
    l.launch("geglu_rows", n, (hidden + 255) / 256, 1, 256, 0, out, gu, hidden);
  }

  /** x (n, dim) f32 += rmsnorm(y (n, dim) f32) * w (dim) f32. */
  public void rmsNormAdd(CUdeviceptr x, CUdeviceptr y, CUdeviceptr w, int n, int dim, double eps) {
    l.launch("rmsnorm_add_rows", n, 1, 1, dim >= 2048 ? 1024 : 256, 0, x, y, w, dim, eps);
  }

  /** p (n) f32 *= s. */
  public void scale(CUdeviceptr p, long n, float s) {
    l.launch("scale_f32", (int) Math.min(65535, (n + 255) / 256), 1, 1, 256, 0, p, n, s);
  }

  /** p (n) f32 = cap * tanh(p / cap). */
  public void softcap(CUdeviceptr p, long n, float cap) {
    l.launch("softcap_f32", (int) Math.min(65535, (n + 255) / 256), 1, 1, 256, 0, p, n, cap);
  }
}
