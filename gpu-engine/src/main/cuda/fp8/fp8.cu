// FP8 (float8_e4m3) kernels of the FP8 checkpoints (io.longsieve.cuda.kernels.Fp8Kernels): activation
// quantization for the sm_90a FP8 GEMM (hopper/gemm_fp8_sm90.cu) and the decode GEMV that reads FP8
// weights. They build for every architecture of the fatbin (cuda_fp8.h converts in software below
// sm_89), but the engine keeps weights FP8 only where the FP8 GEMM runs (compute capability 9.0).
//
//   quant_fp8_rows:   x (M, K) bf16 -> q (M, K) e4m3 and scale (M) f32, one scale per row (per token):
//                     scale = max|x_row| / 448 (1 where the row is all zeros), q = e4m3(x / scale), round to
//                     nearest even and saturate at +-448; with fixed non-null, every scale is *fixed (a
//                     static input scale, or a dynamic per-tensor one from fp8_amax + fp8_scale_of_amax).
//   quant_fp8_groups: the same per row and 128-column group: scale (M, ceil(K / 128)) f32, for the
//                     block kernel (activations per token x 128 columns, as DeepSeek-V3 quantizes them);
//                     perRow set: one scale per row, repeated over its groups (per-token activations with
//                     block weights), and fixed as above.
//   fp8_amax / fp8_scale_of_amax: max|x| over a whole (M, K) bf16 into one f32 (cleared first), then
//                     turned into its scale in place (dynamic per-tensor activations).
//   gemv_fp8:         out (m, n) = x (m, k) bf16 . dequant(W (n, k) e4m3)^T (+ bias), 1 <= m <= 8, the
//                     decode step's products: each weight times its scale (per row of W, or per 128 x 128
//                     block), the activations not quantized (decode is bound by the weight bytes; the
//                     product is the CPU reference's). Streams W once with 16-byte loads, 4 warps per
//                     column; every (column, row) is summed in the same order whatever m, so a row's
//                     result does not depend on its batch.
// CPU twins: Fp8Ops (cuda tests) quantize and dequantize exactly so; CpuOps.matmul does the product.
#include <cuda_fp8.h>

#include "../common/common.cuh"

#define FP8_MAX 448.f
#define FP8_GROUP 128

__device__ __forceinline__ uint8_t fp8_encode(float v) {
  return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

__device__ __forceinline__ float fp8_scale_of(float amax) { return amax > 0.f ? amax / FP8_MAX : 1.f; }

// One block per row, 8 values (16 bytes) per load: K is a multiple of 16 (Fp8Kernels checks), so every
// row starts 16-byte aligned in x and 8-byte aligned in q.
extern "C" __global__ void quant_fp8_rows(uint8_t* __restrict__ q, float* __restrict__ scale,
                                          const bf16* __restrict__ x, int K, const float* fixed) {
  __shared__ float red[32];
  const size_t row = blockIdx.x;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * K);
  const int n8 = K / 8;
  float s;
  if (fixed) {
    s = *fixed;
  } else {
    float m = 0.f;
    for (int i = threadIdx.x; i < n8; i += blockDim.x) {
      const uint4 v = xr[i];
      const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const float2 f = __bfloat1622float2(p[j]);
        m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
      }
    }
    s = fp8_scale_of(block_max(m, red));
  }
  if (threadIdx.x == 0) scale[row] = s;
  uint2* qr = reinterpret_cast<uint2*>(q + row * K);
  for (int i = threadIdx.x; i < n8; i += blockDim.x) {
    const uint4 v = xr[i];
    const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
    uint32_t w[2] = {0u, 0u};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const float2 f = __bfloat1622float2(p[j]);
      w[j / 2] |= ((uint32_t)fp8_encode(f.x / s) | ((uint32_t)fp8_encode(f.y / s) << 8)) << (16 * (j % 2));
    }
    qr[i] = make_uint2(w[0], w[1]);
  }
}

// One warp per 128-column group (4 values per lane), the block's warps walking the row's groups.
extern "C" __global__ void quant_fp8_groups(uint8_t* __restrict__ q, float* __restrict__ scale,
                                            const bf16* __restrict__ x, int K, const float* fixed, int perRow) {
  __shared__ float red[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int groups = (K + FP8_GROUP - 1) / FP8_GROUP;
  const size_t row = blockIdx.x;
  float rowScale = 0.f;  // > 0: every group of the row takes it
  if (fixed) {
    rowScale = *fixed;
  } else if (perRow) {
    float m = 0.f;
    for (int i = threadIdx.x; i < K; i += blockDim.x) m = fmaxf(m, fabsf(bf2f(x[row * K + i])));
    rowScale = fp8_scale_of(block_max(m, red));
  }
  for (int gi = warp; gi < groups; gi += warps) {
    float v[4], m = 0.f;
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int col = gi * FP8_GROUP + lane * 4 + e;
      v[e] = col < K ? bf2f(x[row * K + col]) : 0.f;
      m = fmaxf(m, fabsf(v[e]));
    }
    const float gm = warp_max(m);  // every lane takes part, whatever the scale's source
    const float s = rowScale > 0.f ? rowScale : fp8_scale_of(gm);
    if (lane == 0) scale[row * groups + gi] = s;
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int col = gi * FP8_GROUP + lane * 4 + e;
      if (col < K) q[row * K + col] = fp8_encode(v[e] / s);
    }
  }
}

// amax must hold 0 before the launch; non-negative floats order as their bit patterns do.
extern "C" __global__ void fp8_amax(float* amax, const bf16* __restrict__ x, long long n) {
  __shared__ float red[32];
  float m = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    m = fmaxf(m, fabsf(bf2f(x[i])));
  m = block_max(m, red);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned int*>(amax), __float_as_uint(m));
}

extern "C" __global__ void fp8_scale_of_amax(float* s) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *s = fp8_scale_of(*s);
}

__device__ __forceinline__ uint4 fp8_ld16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Four e4m3 (one 32-bit word) to floats, exactly (every e4m3 value is a half).
__device__ __forceinline__ void fp8x4_to_float(uint32_t w, float* f) {
  __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xffff), __NV_E4M3);
  __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> 16), __NV_E4M3);
  float2 a = __half22float2(*reinterpret_cast<__half2*>(&lo)), b = __half22float2(*reinterpret_cast<__half2*>(&hi));
  f[0] = a.x;
  f[1] = a.y;
  f[2] = b.x;
  f[3] = b.y;
}

#define GF8_WPR 4   // warps per output column
#define GF8_NB 8    // activation rows every launch is built for (rows >= m read as zero)

// block: (N / 128, KB) scales, else (N): one per row of W.
extern "C" __global__ void __launch_bounds__(256) gemv_fp8(void* __restrict__ out, const bf16* __restrict__ x,
                                                           const uint8_t* __restrict__ W,
                                                           const float* __restrict__ wScale, int blockScaled,
                                                           const float* __restrict__ bias, int M, int N, int K,
                                                           int mode) {
  __shared__ float part[8][GF8_NB];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r = warp / GF8_WPR, j = warp % GF8_WPR;
  const int n = blockIdx.x * (8 / GF8_WPR) + r;
  const int nc = min(n, N - 1);
  const uint8_t* w = W + (size_t)nc * K;
  const int kb = (K + FP8_GROUP - 1) / FP8_GROUP;
  float acc[GF8_NB];
#pragma unroll
  for (int b = 0; b < GF8_NB; b++) acc[b] = 0.f;
  // two slices in flight per lane (the order of the sums stays the lane's k order)
#pragma unroll 2
  for (int k0 = (j * 32 + lane) * 16; k0 < K; k0 += GF8_WPR * 512) {
    const int kc = k0;  // K is a multiple of 16 (Fp8Kernels checks): a 16-byte load never runs past a row
    const uint4 wv = fp8_ld16(w + kc);
    float wf[16];
    fp8x4_to_float(wv.x, wf);
    fp8x4_to_float(wv.y, wf + 4);
    fp8x4_to_float(wv.z, wf + 8);
    fp8x4_to_float(wv.w, wf + 12);
    // 16 bytes at a 16-aligned k never cross a 128-column scale block
    const float sb = blockScaled ? wScale[(size_t)(nc / FP8_GROUP) * kb + k0 / FP8_GROUP] : 1.f;
#pragma unroll
    for (int b = 0; b < GF8_NB; b++) {
      if (b >= M) break;
      const bf16* xr = x + (size_t)b * K + kc;
      const uint4 x0 = fp8_ld16(xr), x1 = fp8_ld16(xr + 8);
      const __nv_bfloat162* xp0 = reinterpret_cast<const __nv_bfloat162*>(&x0);
      const __nv_bfloat162* xp1 = reinterpret_cast<const __nv_bfloat162*>(&x1);
      float d = 0.f;
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const float2 a = __bfloat1622float2(xp0[i]), c = __bfloat1622float2(xp1[i]);
        d = fmaf(wf[2 * i], a.x, d);
        d = fmaf(wf[2 * i + 1], a.y, d);
        d = fmaf(wf[8 + 2 * i], c.x, d);
        d = fmaf(wf[8 + 2 * i + 1], c.y, d);
      }
      acc[b] = fmaf(d, sb, acc[b]);
    }
  }
#pragma unroll
  for (int b = 0; b < GF8_NB; b++) {
    const float v = warp_sum(acc[b]);
    if (lane == 0) part[warp][b] = v;
  }
  __syncthreads();
  if (j == 0 && lane < M && n < N) {
    float v = 0.f;
#pragma unroll
    for (int i = 0; i < GF8_WPR; i++) v += part[warp + i][lane];
    if (!blockScaled) v *= wScale[n];
    if (bias) v += bias[n];
    const size_t idx = (size_t)lane * N + n;
    if (mode == OUT_F32) ((float*)out)[idx] = v;
    else if (mode == OUT_F32_ADD) ((float*)out)[idx] += v;
    else ((bf16*)out)[idx] = f2bf(v);
  }
}
