// Row-wise kernels of the forward pass: embedding gather, RMSNorm, RoPE, KV-cache append, SwiGLU,
// plus the fills the synthetic benchmark model and the tests use. CPU twins: cpu/kernels/CpuOps, model/Rope,
// cpu/kernels/KvCache.
#include "../common/common.cuh"
#include "../common/decode_row.cuh"

// x (n, dim) f32 = table[tokens[i]] (vocab, dim) bf16. Token ids out of range are clamped so a bad
// id can never read outside the table (the host validates prompt ids before they get here).
extern "C" __global__ void embed_rows(float* __restrict__ x, const bf16* __restrict__ table,
                                      const int* __restrict__ tokens, int dim, int vocab) {
  int row = blockIdx.x;
  int t = tokens[row];
  t = t < 0 ? 0 : (t >= vocab ? vocab - 1 : t);
  const bf16* src = table + (size_t)t * dim;
  float* dst = x + (size_t)row * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = bf2f(src[i]);
}

// out (n, dim) bf16 = x / sqrt(mean(x^2) + eps) * w, one block per row (CpuOps.rmsNorm).
extern "C" __global__ void rmsnorm_rows(bf16* __restrict__ out, const float* __restrict__ x,
                                        const float* __restrict__ w, int dim, double eps) {
  __shared__ float red[32];
  const float* xr = x + (size_t)blockIdx.x * dim;
  float ss = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss, red);
  float inv = (float)(1.0 / sqrt((double)(ss / (float)dim) + eps));
  bf16* o = out + (size_t)blockIdx.x * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = f2bf(w[i] * (xr[i] * inv));
}

// out (n, heads, headDim) bf16 = RoPE of in rows (row i at in + i * inStride, heads * headDim f32).
// Row i is rotated at positions[i] when positions is given (list-index or any explicit positions),
// else at pos0 + i (original positions). "Rotate half" layout, as model/Rope.apply.
extern "C" __global__ void rope_rows(bf16* __restrict__ out, const float* __restrict__ in, int inStride,
                                     int heads, int headDim, const float* __restrict__ invFreq,
                                     const int* __restrict__ positions, int pos0) {
  int row = blockIdx.x, half = headDim / 2;
  int pos = positions ? positions[row] : pos0 + row;
  const float* src = in + (size_t)row * inStride;
  bf16* dst = out + (size_t)row * heads * headDim;
  // grid (rows, y): the y blocks of a row share its heads * half rotations (one row still fills the GPU)
  for (int t = blockIdx.y * blockDim.x + threadIdx.x; t < heads * half; t += blockDim.x * gridDim.y) {
    int h = t / half, i = t % half;
    float c, s;
    rope_cs(pos, invFreq[i], &c, &s);
    float x1 = src[h * headDim + i], x2 = src[h * headDim + half + i];
    dst[h * headDim + i] = f2bf(x1 * c - x2 * s);
    dst[h * headDim + half + i] = f2bf(x2 * c + x1 * s);
  }
}

// One token's key (before RoPE) and value into one layer of a paged cache at (slot, pos): the keys
// as they are into kpre, rotated at pos into krope (the copy dense attention reads), values into v.
// Threads of the grid's y blocks share the nKv * headDim / 2 rotations.
__device__ __forceinline__ void append_token(bf16* __restrict__ kpre, bf16* __restrict__ krope,
                                             bf16* __restrict__ v, const float* __restrict__ kr,
                                             const float* __restrict__ vr, int nKv, int headDim, int pageSize,
                                             const int* __restrict__ pageTable, int slot, int pos,
                                             const float* __restrict__ invFreq) {
  const int half = headDim / 2;
  for (int t = blockIdx.y * blockDim.x + threadIdx.x; t < nKv * half; t += blockDim.x * gridDim.y) {
    int h = t / half, i = t % half;
    size_t base = kv_offset(pageTable, slot, h, nKv, pageSize, headDim);
    float x1 = kr[h * headDim + i], x2 = kr[h * headDim + half + i];
    float c, s;
    rope_cs(pos, invFreq[i], &c, &s);
    kpre[base + i] = f2bf(x1);
    kpre[base + half + i] = f2bf(x2);
    krope[base + i] = f2bf(x1 * c - x2 * s);
    krope[base + half + i] = f2bf(x2 * c + x1 * s);
    v[base + i] = f2bf(vr[h * headDim + i]);
    v[base + half + i] = f2bf(vr[h * headDim + half + i]);
  }
}

// Appends n tokens to one layer of the paged cache at slots slot0.., positions pos0..: keys before
// RoPE into kpre, the same keys rotated at their position into krope (the copy dense attention
// reads), values into v. Row i of k and v is at qkv + i * stride + kOff / vOff (f32).
extern "C" __global__ void kv_append(bf16* __restrict__ kpre, bf16* __restrict__ krope, bf16* __restrict__ v,
                                     const float* __restrict__ qkv, int stride, int kOff, int vOff, int nKv,
                                     int headDim, int pageSize, const int* __restrict__ pageTable, int slot0,
                                     int pos0, const float* __restrict__ invFreq) {
  const int row = blockIdx.x;
  const float* r = qkv + (size_t)row * stride;
  append_token(kpre, krope, v, r + kOff, r + vOff, nKv, headDim, pageSize, pageTable, slot0 + row, pos0 + row, invFreq);
}

// A batched decode step's append: row b of qkv is sequence b's token, written into layer `layer` of
// its own cache at the slot and position its DecodeRow gives (decode_row.cuh).
extern "C" __global__ void kv_append_rows(const DecodeRow* __restrict__ rows, int layer,
                                          const float* __restrict__ qkv, int stride, int kOff, int vOff, int nKv,
                                          int headDim, int pageSize, const float* __restrict__ invFreq) {
  const DecodeRow d = rows[blockIdx.x];
  const size_t at = (size_t)layer * d.layerElems;
  const float* r = qkv + (size_t)blockIdx.x * stride;
  append_token(d.kPre + at, d.kRope + at, d.v + at, r + kOff, r + vOff, nKv, headDim, pageSize, d.pageTable, d.slot,
               d.pos, invFreq);
}

// out (n, hidden) bf16 = silu(gate) * up where gu (n, 2 * hidden) holds [gate | up] per row.
extern "C" __global__ void swiglu_rows(bf16* __restrict__ out, const bf16* __restrict__ gu, int hidden) {
  const bf16* g = gu + (size_t)blockIdx.x * 2 * hidden;
  bf16* o = out + (size_t)blockIdx.x * hidden;
  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < hidden; i += blockDim.x * gridDim.y) {
    float a = bf2f(g[i]), b = bf2f(g[hidden + i]);
    o[i] = f2bf(a / (1.f + expf(-a)) * b);
  }
}

__device__ __forceinline__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return (uint32_t)x;
}

// p[0..n) bf16 = uniform in [-scale, scale) from a counter hash: random weights made on the device.
extern "C" __global__ void fill_random_bf16(bf16* p, long long n, unsigned long long seed, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float u = (hash32(seed * 0x9E3779B97F4A7C15ULL + (uint64_t)i) >> 8) * (1.f / 16777216.f);
    p[i] = f2bf((2.f * u - 1.f) * scale);
  }
}

extern "C" __global__ void fill_f32(float* p, long long n, float value) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    p[i] = value;
}

// Widening copy for tests and diagnostics: out f32 = in bf16.
extern "C" __global__ void bf16_to_f32(float* out, const bf16* in, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    out[i] = bf2f(in[i]);
}
