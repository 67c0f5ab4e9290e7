// Flash decoding on CUDA cores, for any head size (a power of two in [8, 256]) and group size up
// to 8: the path for head sizes the tensor-core kernels (prefill_attention.cu, decode_attention.cu)
// do not cover, and the reference they were measured against. Same cache layout and visibility as
// prefill_attention.cu. CPU twin: cpu/policy/DenseAttention.
//   attn_split_g4 / _g8 + attn_combine: each block takes one KV head, one query row and one split of
//       the key range; it scores the split's keys for all heads of the group, softmaxes them in
//       shared memory and writes an unnormalised partial output with its max and sum; the combine
//       kernel merges the splits (also used by decode_attention.cu).
#include "../common/attn_tile.cuh"
#include "../common/attn_merge.cuh"  // merge_splits4
#include "../common/decode_row.cuh"

#define AS_THREADS 256
#define AS_UNROLL 8      // keys per thread whose loads are in flight together
#define AS_MAX_PAGES 40  // page-table entries of one split staged in shared memory (chunk / pageSize + 1)

// Dynamic shared memory: G * chunk floats of scores + AS_THREADS * 8 floats for the reduction.
// partO (rows, nHeads, splits, D) f32 unnormalised; partML (rows, nHeads, splits, 2) f32 (max, sum).
// MAXG bounds the group size at compile time (register arrays); G <= MAXG at run time.
template <int MAXG>
__device__ __forceinline__ void attn_split_body(float* __restrict__ partO, float* __restrict__ partML,
                                                const bf16* __restrict__ Q, const bf16* __restrict__ K,
                                                const bf16* __restrict__ V, const int* __restrict__ pageTable,
                                                int nHeads, int nKv, int D, int pageSize, int end, int window,
                                                int chunk, float scale, const float* __restrict__ bias) {
  extern __shared__ float sh[];
  __shared__ float stat[MAXG][2];
  __shared__ int pages[AS_MAX_PAGES];
  const int kvh = blockIdx.x, split = blockIdx.y, row = blockIdx.z, splits = gridDim.y;
  const int G = nHeads / nKv, tid = threadIdx.x;
  const int TPK = D / 8, KPP = AS_THREADS / TPK;  // threads per key, keys per pass
  const int pageShift = __ffs(pageSize) - 1;
  const int start = window > 0 ? max(0, end - window) : 0;
  const int ks = start + split * chunk, ke = min(end, ks + chunk);
  float* sc = sh;                // (G, chunk) scores, then probabilities
  float* red = sh + G * chunk;   // (AS_THREADS * 8) reduction scratch

  // this split's pages, looked up once: the loads below then depend on nothing but shared memory
  const int firstPage = ks >> pageShift;
  if (ks < ke) {
    const int nPages = ((ke - 1) >> pageShift) - firstPage + 1;
    for (int i = tid; i < nPages; i += AS_THREADS) pages[i] = pageTable[firstPage + i];
  }
  __syncthreads();
  auto addr = [&](int key) -> size_t {
    int page = pages[(key >> pageShift) - firstPage];
    return (((size_t)page * nKv + kvh) * pageSize + (key & (pageSize - 1))) * (size_t)D;
  };

  const int sub = tid % TPK, kslot = tid / TPK, d0 = sub * 8;
  // this thread's 8 elements of keys base + u * KPP + kslot (u < AS_UNROLL) of src, loads in flight together
  auto loadU = [&](uint4 (&r)[AS_UNROLL], const bf16* src, int base) {
#pragma unroll
    for (int u = 0; u < AS_UNROLL; u++) {
      int key = base + u * KPP + kslot;
      r[u] = key < ke ? __ldg(reinterpret_cast<const uint4*>(src + addr(key) + d0)) : make_uint4(0, 0, 0, 0);
    }
  };
  float qv[MAXG][8];
#pragma unroll
  for (int g = 0; g < MAXG; g++) {
    if (g < G) {
      uint4 raw = *reinterpret_cast<const uint4*>(Q + ((size_t)row * nHeads + kvh * G + g) * D + d0);
      const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
      for (int j = 0; j < 4; j++) {
        float2 f = __bfloat1622float2(p[j]);
        qv[g][2 * j] = f.x * scale;
        qv[g][2 * j + 1] = f.y * scale;
      }
    }
  }

  // phase 1: scores of every key of the split for every head of the group. The loop bounds are
  // the same for every thread: the shuffles below need whole warps.
  for (int base = ks; base < ke; base += AS_UNROLL * KPP) {
    uint4 kr[AS_UNROLL];
    loadU(kr, K, base);
#pragma unroll
    for (int u = 0; u < AS_UNROLL; u++) {
      int key = base + u * KPP + kslot;
      float kf[8];
      unpack8(kr[u], kf);
#pragma unroll
      for (int g = 0; g < MAXG; g++) {
        if (g < G) {
          float s = split_dot(qv[g], kf, TPK);
          if (sub == 0 && key < ke) sc[g * chunk + (key - ks)] = s + (bias ? bias[(size_t)key * nHeads + kvh * G + g] : 0.f);
        }
      }
    }
  }
  __syncthreads();

  // phase 2: per-head max and sum over the split; scores become exp(s - max)
  const int nk = max(0, ke - ks);
  split_softmax<AS_THREADS, false>(sc, chunk, nk, G, red, stat);

  // phase 3: P V for every head of the group
  float acc[MAXG][8];
  split_zero(acc);
  for (int base = ks; base < ke; base += AS_UNROLL * KPP) {
    uint4 vr[AS_UNROLL];
    loadU(vr, V, base);
#pragma unroll
    for (int u = 0; u < AS_UNROLL; u++) {
      int key = base + u * KPP + kslot;
      if (key < ke) {
        float vf[8];
        unpack8(vr[u], vf);
        split_pv(acc, sc + (key - ks), chunk, G, vf);
      }
    }
  }
  // reduce the KPP key slots of each head through shared memory
  split_store<AS_THREADS>(acc, red, stat, partO, partML, ((size_t)row * nHeads + kvh * G) * splits + split, G, splits,
                          D, KPP, kslot, d0);
}

extern "C" __global__ void __launch_bounds__(AS_THREADS, 2)
    attn_split_g4(float* partO, float* partML, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable,
                  int nHeads, int nKv, int D, int pageSize, int before, int window, int chunk, float scale,
                  const float* bias) {
  attn_split_body<4>(partO, partML, Q, K, V, pageTable, nHeads, nKv, D, pageSize, before + blockIdx.z + 1, window, chunk,
                     scale, bias);
}
extern "C" __global__ void __launch_bounds__(AS_THREADS)
    attn_split_g8(float* partO, float* partML, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable,
                  int nHeads, int nKv, int D, int pageSize, int before, int window, int chunk, float scale,
                  const float* bias) {
  attn_split_body<8>(partO, partML, Q, K, V, pageTable, nHeads, nKv, D, pageSize, before + blockIdx.z + 1, window, chunk,
                     scale, bias);
}

// A batched decode step (decode_row.cuh): row b of Q is sequence b's query, attending slots [.., rows[b].slot + 1)
// of layer `layer` of its own cache in splits of rows[b].chunk keys; the grid's split count covers the
// longest row, a row's extra splits are empty and weigh 0 in attn_combine (as in flash_decode_rows_*).
// Dynamic shared memory sized for the largest chunk the host plans.
template <int MAXG>
__device__ __forceinline__ void attn_split_row(float* partO, float* partML, const bf16* Q,
                                               const DecodeRow* __restrict__ rows, int layer, int nHeads, int nKv,
                                               int D, int pageSize, int window, float scale) {
  const DecodeRow r = rows[blockIdx.z];
  const size_t at = (size_t)layer * r.layerElems;
  attn_split_body<MAXG>(partO, partML, Q, r.kRope + at, r.v + at, r.pageTable, nHeads, nKv, D, pageSize, r.slot + 1,
                        window, r.chunk, scale, nullptr);
}
extern "C" __global__ void __launch_bounds__(AS_THREADS, 2)
    attn_split_rows_g4(float* partO, float* partML, const bf16* Q, const DecodeRow* rows, int layer, int nHeads,
                       int nKv, int D, int pageSize, int window, float scale) {
  attn_split_row<4>(partO, partML, Q, rows, layer, nHeads, nKv, D, pageSize, window, scale);
}
extern "C" __global__ void __launch_bounds__(AS_THREADS)
    attn_split_rows_g8(float* partO, float* partML, const bf16* Q, const DecodeRow* rows, int layer, int nHeads,
                       int nKv, int D, int pageSize, int window, float scale) {
  attn_split_row<8>(partO, partML, Q, rows, layer, nHeads, nKv, D, pageSize, window, scale);
}

// out (rows, nHeads, D) bf16 = merge of the splits' partial outputs (merge_splits4, attn_tile.cuh): a thread
// per (head, four dims) of a row, grid (ceil(nHeads * D / 4 / AC_THREADS), rows), AC_THREADS threads. Latency:
// AC_BATCH splits' loads in flight per round trip (flash decoding at 128K has 66 splits per head: 3 round
// trips, where a thread per dim looping over the splits one by one took ~18 us).
#define AC_THREADS 128  // Kernels.COMBINE_THREADS
#define AC_BATCH 24
extern "C" __global__ void __launch_bounds__(AC_THREADS) attn_combine(bf16* __restrict__ out,
                                                                      const float* __restrict__ partO,
                                                                      const float* __restrict__ partML, int nHeads,
                                                                      int splits, int D) {
  const int quads = D / 4, idx = blockIdx.x * AC_THREADS + threadIdx.x, row = blockIdx.y;
  if (idx >= nHeads * quads) return;
  const int h = idx / quads, d = (idx % quads) * 4;
  const size_t head = (size_t)row * nHeads + h;
  merge_splits4<AC_BATCH>(out + head * D, partO, partML, head * splits, splits, D, d);
}
