// KV compression, stage 2 (see kv_compress.cu): deterministic top-k flags per row and the keep / drop
// lists per KV head. CPU twins: cpu/policy/TopK, SnapKv, SelKv.
#include "../common/common.cuh"

// ---------------------------------------------------------------------------------------------
// top-k and lists

// An unsigned int whose order is TopK.sortable's (the float total order, -0 below +0).
__device__ __forceinline__ unsigned kvc_key(float f) {
  unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Exclusive scan of 0/1 flags over the block (blockDim multiple of 32); *total gets the block's sum.
__device__ __forceinline__ int kvc_scan01(int v, int* sWarp /* 33 ints */, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  unsigned b = __ballot_sync(0xffffffffu, v);
  int inWarp = __popc(b & ((1u << lane) - 1u));
  __syncthreads();
  if (lane == 0) sWarp[warp] = __popc(b);
  __syncthreads();
  if (warp == 0) {
    int x = lane < nw ? sWarp[lane] : 0, incl = x;
    for (int o = 1; o < 32; o <<= 1) {
      int y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    if (lane < nw) sWarp[lane] = incl - x;
    if (lane == 31) sWarp[32] = incl;
  }
  __syncthreads();
  *total = sWarp[32];
  return sWarp[warp] + inWarp;
}

// flags (rows, n) u8 at flags + row * flagLd: 1 for the k largest score[row * ld + j], j < n, ties
// to the lower index (TopK.select: k >= n takes all, k <= 0 none). One block (1024 threads) per row:
// a radix select of the k-th largest key, then the keys above it and the first equal ones in index order.
extern "C" __global__ void __launch_bounds__(1024)
    kvc_topk_flags(unsigned char* __restrict__ flags, int flagLd, const float* __restrict__ score, int ld, int n,
                   int k) {
  __shared__ int hist[256];
  __shared__ unsigned sPrefix;
  __shared__ int sRemain;
  __shared__ int sWarp[33];
  const float* s = score + (size_t)blockIdx.x * ld;
  unsigned char* f = flags + (size_t)blockIdx.x * flagLd;
  const int tid = threadIdx.x, nt = blockDim.x;
  if (k >= n || k <= 0) {
    for (int j = tid; j < n; j += nt) f[j] = k > 0 ? 1 : 0;
    return;
  }
  if (tid == 0) {
    sPrefix = 0;
    sRemain = k;
  }
  unsigned mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += nt) hist[b] = 0;
    __syncthreads();
    const unsigned prefix = sPrefix;
    for (int j = tid; j < n; j += nt) {
      unsigned u = kvc_key(s[j]);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1);
    }
    __syncthreads();
    if (tid == 0) {
      int remain = sRemain, above = 0, b = 255;
      for (; b > 0; b--) {
        if (above + hist[b] >= remain) break;
        above += hist[b];
      }
      sRemain = remain - above;
      sPrefix = prefix | ((unsigned)b << shift);
    }
    mask |= 255u << shift;
    __syncthreads();
  }
  const unsigned T = sPrefix;
  const int takeEqual = sRemain;  // keys equal to T to take, lowest indices first
  int before = 0;
  for (int base = 0; base < n; base += nt) {
    int j = base + tid;
    unsigned u = j < n ? kvc_key(s[j]) : 0u;
    int eq = j < n && u == T, total;
    int rank = before + kvc_scan01(eq, sWarp, &total);
    if (j < n) f[j] = (u > T || (eq && rank < takeEqual)) ? 1 : 0;
    before += total;
  }
}

// Keep and drop lists of KV head g = blockIdx.x over slots [0, n): kept are slots < lo, slots >= hi
// and slot lo + j where flags[g * flagLd + j]; keep (nKv, keepLd) and drop (nKv, dropLd) (or null)
// ascending; counts (nKv, 2) = (kept, dropped). One block (1024 threads) per KV head.
extern "C" __global__ void __launch_bounds__(1024)
    kvc_lists(int* __restrict__ keep, int keepLd, int* __restrict__ drop, int dropLd, int* __restrict__ counts,
              const unsigned char* __restrict__ flags, int flagLd, int n, int lo, int hi) {
  __shared__ int sWarp[33];
  const int g = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  int kept = 0, dropped = 0;
  for (int base = 0; base < n; base += nt) {
    int j = base + tid;
    int on = j < n && (j < lo || j >= hi || flags[(size_t)g * flagLd + j - lo] != 0);
    int total;
    int r = kvc_scan01(on, sWarp, &total);
    if (j < n) {
      if (on) {
        if (kept + r < keepLd) keep[(size_t)g * keepLd + kept + r] = j;
      } else if (drop) {
        int q = dropped + tid - r;  // the chunk's dropped slots before j: tid - (kept before j)
        if (q < dropLd) drop[(size_t)g * dropLd + q] = j;
      }
    }
    kept += total;
    dropped += min(nt, n - base) - total;
  }
  if (tid == 0) {
    counts[g * 2] = kept;
    counts[g * 2 + 1] = dropped;
  }
}
