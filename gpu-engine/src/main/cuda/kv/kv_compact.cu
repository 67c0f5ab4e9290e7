// KV compression, stage 4 (see kv_compress.cu): compaction of the kept slots through scratch, moving
// each KV head's kept keys, rotated keys, values and the bias of its query heads to the front of the layer
// (in-place moves would race). CPU twin: cpu/kernels/KvCache.retain.
#include "kv_tile.cuh"

// Source slot of destination slot i: keep[g * keepLd + i], or without lists every slot but dropSlot.
__device__ __forceinline__ int kvc_from(const int* keep, int keepLd, int g, int i, int dropSlot) {
  return keep ? keep[(size_t)g * keepLd + i] : (i < dropSlot ? i : i + 1);
}

// scratch: 3 x (nKv, rows, d) bf16 (kPre, kRope, v) then (rows, nHeads) f32 bias, rows = count - first;
// destination slots first .. count - 1; bias (slots, nHeads), KV head g's query heads g * G .. g * G + G - 1.
// Grid (rows, nKv), threads over d / 8 (d a multiple of 8).
extern "C" __global__ void kvc_gather(bf16* __restrict__ scratch, const bf16* __restrict__ kPre,
                                      const bf16* __restrict__ kRope, const bf16* __restrict__ v,
                                      const float* __restrict__ bias, const int* __restrict__ pageTable,
                                      const int* __restrict__ keep, int keepLd, int dropSlot, int first, int count,
                                      int nKv, int nHeads, int d, int pageSize) {
  const int r = blockIdx.x, g = blockIdx.y, rows = count - first;
  const int from = kvc_from(keep, keepLd, g, first + r, dropSlot);
  const size_t o = kv_offset(pageTable, from, g, nKv, pageSize, d);
  const size_t plane = (size_t)nKv * rows * d, s = ((size_t)g * rows + r) * d;
  for (int c = threadIdx.x; c < d / 8; c += blockDim.x) {
    reinterpret_cast<uint4*>(scratch + s)[c] = reinterpret_cast<const uint4*>(kPre + o)[c];
    reinterpret_cast<uint4*>(scratch + plane + s)[c] = reinterpret_cast<const uint4*>(kRope + o)[c];
    reinterpret_cast<uint4*>(scratch + 2 * plane + s)[c] = reinterpret_cast<const uint4*>(v + o)[c];
  }
  if (bias) {
    float* sb = reinterpret_cast<float*>(scratch + 3 * plane);
    const int G = nHeads / nKv;
    for (int h = g * G + threadIdx.x; h < (g + 1) * G; h += blockDim.x) sb[(size_t)r * nHeads + h] = bias[(size_t)from * nHeads + h];
  }
}

extern "C" __global__ void kvc_scatter(const bf16* __restrict__ scratch, bf16* __restrict__ kPre,
                                       bf16* __restrict__ kRope, bf16* __restrict__ v, float* __restrict__ bias,
                                       const int* __restrict__ pageTable, int first, int count, int nKv, int nHeads,
                                       int d, int pageSize) {
  const int r = blockIdx.x, g = blockIdx.y, rows = count - first;
  const size_t o = kv_offset(pageTable, first + r, g, nKv, pageSize, d);
  const size_t plane = (size_t)nKv * rows * d, s = ((size_t)g * rows + r) * d;
  for (int c = threadIdx.x; c < d / 8; c += blockDim.x) {
    reinterpret_cast<uint4*>(kPre + o)[c] = reinterpret_cast<const uint4*>(scratch + s)[c];
    reinterpret_cast<uint4*>(kRope + o)[c] = reinterpret_cast<const uint4*>(scratch + plane + s)[c];
    reinterpret_cast<uint4*>(v + o)[c] = reinterpret_cast<const uint4*>(scratch + 2 * plane + s)[c];
  }
  if (bias) {
    const float* sb = reinterpret_cast<const float*>(scratch + 3 * plane);
    const int G = nHeads / nKv;
    for (int h = g * G + threadIdx.x; h < (g + 1) * G; h += blockDim.x) bias[(size_t)(first + r) * nHeads + h] = sb[(size_t)r * nHeads + h];
  }
}

// bias (slots, nHeads) = 0 for slots [from, to) (what KvCache.retain leaves behind the kept slots).
extern "C" __global__ void kvc_zero_bias(float* __restrict__ bias, int from, int to, int nHeads) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t < (long long)(to - from) * nHeads) bias[(size_t)from * nHeads + t] = 0.f;
}
