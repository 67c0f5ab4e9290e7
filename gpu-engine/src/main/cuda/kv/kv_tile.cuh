// The tiled f32 dot products of the KV compression kernels (kv_compress.cu's observation scores), and
// the common helpers they all include.
#pragma once
#include "../common/common.cuh"

#define KVC_T 64    // rows and keys per tile of the tiled dot products
#define KVC_DC 32   // head-dim chunk staged in shared memory

// acc[a][b] = dot(A row ty + 16a, B row tx + 16b) over d, both staged chunk by chunk; loadA/loadB
// fill (KVC_T, KVC_DC + 1) f32 tiles with chunk e0 (zeros outside). 256 threads.
template <typename LA, typename LB>
__device__ __forceinline__ void tile_dots(float acc[4][4], float* sA, float* sB, int d, LA loadA, LB loadB) {
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
#pragma unroll
  for (int a = 0; a < 4; a++)
#pragma unroll
    for (int b = 0; b < 4; b++) acc[a][b] = 0.f;
  for (int e0 = 0; e0 < d; e0 += KVC_DC) {
    __syncthreads();
    loadA(sA, e0);
    loadB(sB, e0);
    __syncthreads();
#pragma unroll 8
    for (int e = 0; e < KVC_DC; e++) {
      float av[4], bv[4];
#pragma unroll
      for (int a = 0; a < 4; a++) av[a] = sA[(ty + 16 * a) * (KVC_DC + 1) + e];
#pragma unroll
      for (int b = 0; b < 4; b++) bv[b] = sB[(tx + 16 * b) * (KVC_DC + 1) + e];
#pragma unroll
      for (int a = 0; a < 4; a++)
#pragma unroll
        for (int b = 0; b < 4; b++) acc[a][b] = fmaf(av[a], bv[b], acc[a][b]);
    }
  }
}
