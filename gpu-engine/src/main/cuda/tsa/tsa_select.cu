// Token Sparse Attention, step 2 of 3 (the whole pipeline is listed in tsa.cu): from the proxy
// masses a (nHeads, prefix) to the attended lists. tsa_pool and tsa_head_mean shape the scores, then
// two block-wide radix selections on plain f32 rows: tsa_keep_count (how many prefix keys to keep,
// from the cumulative-mass cut-off) and tsa_select (each head's top-keep, ascending, ++ the window).
// Apart from tsa.cu because nothing here touches the cache or the tensor-core tiles: it is integer
// radix search whose exactness matters (ties, fixed-point masses), mirrored in Java by
// TsaHostLogicTest.
#include "../common/common.cuh"

// Grid (ceil(prefix / 256), nHeads). pooled (nHeads, prefix) = avg_pool1d(a * invW): window sums over
// [o - kernel/2, o - kernel/2 + kernel) with out-of-range taps 0, divided by kernel; even kernels leave
// the last slot 0 (torch's output is one short). kernel <= 1: a * invW.
extern "C" __global__ void tsa_pool(float* pooled, const float* a, int prefix, int kernel, float invW) {
  const int h = blockIdx.y, o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= prefix) return;
  const float* row = a + (size_t)h * prefix;
  float* dst = pooled + (size_t)h * prefix;
  if (kernel <= 1) {
    dst[o] = row[o] * invW;
    return;
  }
  const int pad = kernel / 2, len = prefix + 2 * pad - kernel + 1;
  if (o >= len) {
    dst[o] = 0.f;
    return;
  }
  float s = 0.f;
  for (int j = o - pad; j < o - pad + kernel; j++)
    if (j >= 0 && j < prefix) s += row[j] * invW;
  dst[o] = s / (float)kernel;
}

// g (prefix) = sum over heads (in head order) of pooled / nHeads.
extern "C" __global__ void tsa_head_mean(float* g, const float* pooled, int prefix, int nHeads) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= prefix) return;
  float s = 0.f;
  for (int h = 0; h < nHeads; h++) s += pooled[(size_t)h * prefix + j];
  g[j] = s / (float)nHeads;
}

// Unsigned key whose order is the float's order.
__device__ __forceinline__ unsigned tsa_key(float f) {
  unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float tsa_unkey(unsigned u) {
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}

#define TSA_FX 1099511627776.0  // 2^40: masses (normalised, <= 1) as exact 64-bit integers
#define TSA_KC_THREADS 512
#define TSA_KC_WARPS (TSA_KC_THREADS / 32)

__device__ __forceinline__ unsigned long long tsa_fx(float v) {
  return v > 0.f ? (unsigned long long)((double)v * TSA_FX) : 0ull;
}

// One block of TSA_KC_THREADS; smem TSA_KC_WARPS * 256 * (8 + 4) bytes. info[0] = keep (-1: drop
// nothing, dense), info[1] = n_drop before the CPU's +1. With g normalised (v = g * (1 / (sum g + 1e-8)))
// and sorted ascending, n_drop = #{m >= 1 : sum of the m smallest < tau}: found by a 4 x 8-bit radix
// descent on the value with per-bin counts and masses, masses in 2^-40 fixed point (exact, order-free
// sums, so the count is deterministic); equal values at the cut-off are counted while they still fit,
// which is what the CPU's sequential sum over its sorted order does. forcedKeep >= 0 replaces the
// resulting keep (benchmarks at fixed ratios still pay for the search).
extern "C" __global__ void __launch_bounds__(TSA_KC_THREADS)
    tsa_keep_count(int* info, const float* g, int prefix, double tau, int minKeep, int forcedKeep) {
  extern __shared__ __align__(16) unsigned char tsa_kc_smem[];
  unsigned long long* hm = reinterpret_cast<unsigned long long*>(tsa_kc_smem);  // (warp, 256) masses
  unsigned* hc = reinterpret_cast<unsigned*>(hm + TSA_KC_WARPS * 256);          // (warp, 256) counts
  __shared__ double red[TSA_KC_WARPS];
  __shared__ unsigned long long sBelowMass;
  __shared__ unsigned sBelowCount, sPrefix, sTie;
  __shared__ int sState;  // 0 descending, 1 found the cut-off value, 2 everything fits under tau
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  double t = 0;
  for (int j = tid; j < prefix; j += TSA_KC_THREADS) t += g[j];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  if (lane == 0) red[warp] = t;
  __syncthreads();
  double total = 0;
  for (int i = 0; i < TSA_KC_WARPS; i++) total += red[i];
  const float inv = (float)(1.0 / (total + 1e-8));
  const unsigned long long tauFx = tau > 0 ? (unsigned long long)(tau * TSA_FX) : 0ull;
  if (tid == 0) {
    sBelowMass = 0;
    sBelowCount = 0;
    sPrefix = 0;
    sTie = 0;
    sState = 0;
  }
  __syncthreads();

  for (int shift = 24; shift >= 0 && tauFx > 0; shift -= 8) {
    for (int i = tid; i < TSA_KC_WARPS * 256; i += TSA_KC_THREADS) {
      hm[i] = 0;
      hc[i] = 0;
    }
    __syncthreads();
    const unsigned pfx = sPrefix;
    for (int j = tid; j < prefix; j += TSA_KC_THREADS) {
      float v = g[j] * inv;
      unsigned u = tsa_key(v);
      if (shift == 24 || (u >> (shift + 8)) == (pfx >> (shift + 8))) {
        unsigned b = (u >> shift) & 255u;
        atomicAdd(&hc[warp * 256 + b], 1u);
        atomicAdd(&hm[warp * 256 + b], tsa_fx(v));
      }
    }
    __syncthreads();
    if (tid < 256) {  // thread b owns column b: sums its warps' bins into row 0
      unsigned c = 0;
      unsigned long long m = 0;
      for (int wp = 0; wp < TSA_KC_WARPS; wp++) {
        c += hc[wp * 256 + tid];
        m += hm[wp * 256 + tid];
      }
      hc[tid] = c;
      hm[tid] = m;
    }
    __syncthreads();
    if (tid == 0) {
      int found = -1;
      for (int b = 0; b < 256; b++) {
        if (hc[b] == 0) continue;
        if (sBelowMass + hm[b] < tauFx) {  // every value of bin b is dropped
          sBelowMass += hm[b];
          sBelowCount += hc[b];
        } else {
          found = b;
          break;
        }
      }
      if (found < 0) {
        sState = 2;  // only possible on the first pass: the whole mass is below tau
      } else {
        sPrefix = pfx | ((unsigned)found << shift);
        sTie = hc[found];
        if (shift == 0) sState = 1;
      }
    }
    __syncthreads();
    if (sState == 2) break;
  }
  if (tid == 0) {
    long long nDrop;
    if (tauFx == 0) {
      nDrop = 0;
    } else if (sState == 2) {
      nDrop = sBelowCount;
    } else {
      // sTie values v* at the cut-off; the k-th still drops while below + k * v* < tau
      unsigned long long vfx = tsa_fx(tsa_unkey(sPrefix)), room = tauFx - sBelowMass - 1;  // below < tau
      unsigned long long k = vfx == 0 ? sTie : min((unsigned long long)sTie, room / vfx);
      nDrop = (long long)sBelowCount + (long long)k;
    }
    info[1] = (int)nDrop;
    info[0] = forcedKeep >= 0 ? forcedKeep : nDrop == 0 ? -1 : max(minKeep, prefix - (int)(nDrop + 1));
  }
}

// Exclusive prefix sum over a block of TSA_SEL_THREADS; *total gets the block's sum. Uses sScan (32 ints).
#define TSA_SEL_THREADS 1024
#define TSA_SEL_ITEMS 8
__device__ __forceinline__ int tsa_block_scan(int v, int* sScan, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  __syncthreads();  // sScan may still be read by the previous call
  if (lane == 31) sScan[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int s = sScan[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      int y = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s += y;
    }
    sScan[lane] = s;  // inclusive over warps
  }
  __syncthreads();
  *total = sScan[31];
  return (warp > 0 ? sScan[warp - 1] : 0) + x - v;
}

// Grid (nHeads), block TSA_SEL_THREADS. keep = info[0] (nothing to do when < 0 or >= prefix);
// lists (nHeads, keep + w) int = the keep largest pooled[h] slots (ties to the lower slot) ascending,
// then the window slots prefix ..; info[2 + h] = the index of the head's first entry >= before.
extern "C" __global__ void __launch_bounds__(TSA_SEL_THREADS)
    tsa_select(int* lists, int* info, const float* pooled, int prefix, int w, int before) {
  __shared__ unsigned hc[32 * 256];  // (warp, bin) counts
  __shared__ int sScan[32];
  __shared__ unsigned sPrefix, sAbove;
  const int keep = info[0];
  if (keep < 0 || keep >= prefix) return;
  const int tid = threadIdx.x, warp = tid >> 5, h = blockIdx.x, len = keep + w;
  const float* row = pooled + (size_t)h * prefix;
  int* out = lists + (size_t)h * len;
  if (tid == 0) {
    sPrefix = 0;
    sAbove = 0;
  }
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 32 * 256; i += TSA_SEL_THREADS) hc[i] = 0;
    __syncthreads();
    const unsigned pfx = sPrefix;
    for (int j = tid; j < prefix; j += TSA_SEL_THREADS) {
      unsigned u = tsa_key(row[j]);
      if (shift == 24 || (u >> (shift + 8)) == (pfx >> (shift + 8))) atomicAdd(&hc[warp * 256 + ((u >> shift) & 255u)], 1u);
    }
    __syncthreads();
    if (tid < 256) {
      unsigned c = 0;
      for (int wp = 0; wp < 32; wp++) c += hc[wp * 256 + tid];
      hc[tid] = c;
    }
    __syncthreads();
    if (tid == 0) {  // descending: the bin holding the keep-th largest value
      unsigned above = sAbove;
      for (int b = 255; b >= 0; b--) {
        if (above + hc[b] >= (unsigned)keep) {
          sPrefix = pfx | ((unsigned)b << shift);
          break;
        }
        above += hc[b];
      }
      sAbove = above;
    }
    __syncthreads();
  }
  const unsigned cut = sPrefix;
  const int ties = keep - (int)sAbove;  // values equal to the cut-off taken, lowest slots first
  int base = 0, tieBase = 0;
  for (int j0 = 0; j0 < prefix; j0 += TSA_SEL_THREADS * TSA_SEL_ITEMS) {
    const int jb = j0 + tid * TSA_SEL_ITEMS;
    unsigned u[TSA_SEL_ITEMS];
    int nTie = 0;
#pragma unroll
    for (int k = 0; k < TSA_SEL_ITEMS; k++) {
      u[k] = jb + k < prefix ? tsa_key(row[jb + k]) : 0u;
      nTie += jb + k < prefix && u[k] == cut;
    }
    int tieTotal, selTotal;
    int tieRank = tieBase + tsa_block_scan(nTie, sScan, &tieTotal);
    bool sel[TSA_SEL_ITEMS];
    int nSel = 0;
#pragma unroll
    for (int k = 0; k < TSA_SEL_ITEMS; k++) {
      bool in = jb + k < prefix;
      bool tie = in && u[k] == cut;
      sel[k] = in && (u[k] > cut || (tie && tieRank < ties));
      tieRank += tie;
      nSel += sel[k];
    }
    int pos = base + tsa_block_scan(nSel, sScan, &selTotal);
#pragma unroll
    for (int k = 0; k < TSA_SEL_ITEMS; k++)
      if (sel[k]) out[pos++] = jb + k;
    base += selTotal;
    tieBase += tieTotal;
  }
  for (int i = tid; i < w; i += TSA_SEL_THREADS) out[keep + i] = prefix + i;
  __syncthreads();  // the list is complete (global writes of the block are visible after the barrier)
  if (tid == 0) {
    int lo = 0, hi = len;  // first entry >= before; the window entries are >= prefix >= before
    while (lo < hi) {
      int mid = (lo + hi) >> 1;
      if (out[mid] < before) lo = mid + 1;
      else hi = mid;
    }
    info[2 + h] = lo;
  }
}
