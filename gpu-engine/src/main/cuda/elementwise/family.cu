// Row-wise kernels some families add to Llama's layer (model/FamilyTraits): the per-head RMSNorm of q
// and k (Qwen3, Gemma 3), GeGLU with the tanh GELU (Gemma 3), an RMSNorm of a sub-block's output added
// into the residual (Gemma 3's norms after attention and after the MLP), scaling (Gemma's embedding
// scale) and soft-capping (final_logit_softcapping). CPU twins: cpu/kernels/FamilyOps and
// cpu/kernels/CpuOps.rmsNorm; parity: cuda/kernels/FamilyKernelsParityTest.
#include "../common/common.cuh"

// In place on qkv rows (row i at qkv + i * stride, f32): each of the nQ query heads at offsets
// 0, headDim, ... and each of the nK key heads from kOff becomes x / sqrt(mean(x^2) + eps) * w, w
// wq or wk (headDim f32). Grid (rows, nQ + nK), one block per head of a row.
extern "C" __global__ void qk_norm_rows(float* __restrict__ qkv, int stride, int nQ, int nK, int kOff, int headDim,
                                        const float* __restrict__ wq, const float* __restrict__ wk, double eps) {
  __shared__ float red[32];
  const int h = blockIdx.y;
  const bool key = h >= nQ;
  float* x = qkv + (size_t)blockIdx.x * stride + (key ? kOff + (size_t)(h - nQ) * headDim : (size_t)h * headDim);
  const float* w = key ? wk : wq;
  float ss = 0.f;
  for (int i = threadIdx.x; i < headDim; i += blockDim.x) ss += x[i] * x[i];
  ss = block_sum(ss, red);  // every thread has read its elements before any writes (block_sum syncs)
  float inv = (float)(1.0 / sqrt((double)(ss / (float)headDim) + eps));
  for (int i = threadIdx.x; i < headDim; i += blockDim.x) x[i] = w[i] * (x[i] * inv);
}

// out (n, hidden) bf16 = gelu_tanh(gate) * up where gu (n, 2 * hidden) bf16 holds [gate | up] per row:
// 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))), PyTorch's gelu(approximate="tanh").
extern "C" __global__ void geglu_rows(bf16* __restrict__ out, const bf16* __restrict__ gu, int hidden) {
  const bf16* g = gu + (size_t)blockIdx.x * 2 * hidden;
  bf16* o = out + (size_t)blockIdx.x * hidden;
  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < hidden; i += blockDim.x * gridDim.y) {
    float a = bf2f(g[i]), b = bf2f(g[hidden + i]);
    float gelu = 0.5f * a * (1.f + tanhf(0.7978845608028654f * (a + 0.044715f * a * a * a)));
    o[i] = f2bf(gelu * b);
  }
}

// x (n, dim) f32 += y / sqrt(mean(y^2) + eps) * w, y (n, dim) f32, w (dim) f32: a sub-block's output,
// normed, joins the residual stream. One block per row.
extern "C" __global__ void rmsnorm_add_rows(float* __restrict__ x, const float* __restrict__ y,
                                            const float* __restrict__ w, int dim, double eps) {
  __shared__ float red[32];
  const float* yr = y + (size_t)blockIdx.x * dim;
  float* xr = x + (size_t)blockIdx.x * dim;
  float ss = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += yr[i] * yr[i];
  ss = block_sum(ss, red);
  float inv = (float)(1.0 / sqrt((double)(ss / (float)dim) + eps));
  for (int i = threadIdx.x; i < dim; i += blockDim.x) xr[i] += w[i] * (yr[i] * inv);
}

// p[0..n) f32 *= s.
extern "C" __global__ void scale_f32(float* p, long long n, float s) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    p[i] *= s;
}

// p[0..n) f32 = cap * tanh(p / cap): soft-capping of logits.
extern "C" __global__ void softcap_f32(float* p, long long n, float cap) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    p[i] = tanhf(p[i] / cap) * cap;
}
