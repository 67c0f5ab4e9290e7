// Token Sparse Attention for prefill (issue 5 §1). CPU twin: attention/TokenSparseAttention.
// Cache layout as prefill_attention.cu: (page, nKv, pageSize = 64, headDim) bf16, keys rotated.
// One sparse layer and chunk runs, in order:
//   tsa_proxy_stats_d*   pass 1: per (head, split of keys) the online-softmax max and sum of every
//                        window query (the last w chunk rows) over its keys; causal among the window
//   tsa_proxy_combine    merges the splits: per (head, window row) max (log2 units) and 1 / sum
//   tsa_proxy_mass_d*    pass 2: a[h, j] = sum_r exp(s_rj - m_r) / l_r over window rows for prefix keys
//                        j < prefix; one block owns a key range, so column sums need no atomics
//   tsa_pool             (a / w) avg-pooled as torch avg_pool1d(kernel, 1, kernel / 2) with zeros counted
//   tsa_head_mean        g[j] = mean over heads of the pooled rows (the order the CPU sums in)
//   tsa_keep_count       one block: the cumulative-mass cut-off by radix select (no sort) -> keep
//   tsa_select           one block per head: top-keep of its pooled row (ties to the lower slot),
//                        ascending, ++ the window slots; and the head's first query entry
//   tsa_gather           per query head: K/V of its list as a dense paged cache (nKv = nHeads),
//                        its queries (the suffix of the list) as dense rows, and the row map
//   flash_prefill_heads_d* (prefill_attention.cu) on the gathered tensors, then tsa_scatter.
#include "attn_tile.cuh"

#define TSA_ROWS 128    // window rows per pass of a proxy block: 8 warps x 16
#define TSA_BK 64       // keys per tile (one cache page)
#define TSA_THREADS 256
#define TSA_LOG2E 1.4426950408889634f

// Window rows [r0, r0 + TSA_ROWS) of head h (chunk rows n - w + r) into shared sQ; rows >= w zero.
template <int D>
__device__ __forceinline__ void tsa_load_q(bf16* sQ, const bf16* Q, int n, int nHeads, int h, int w, int r0) {
  constexpr int LD = D + 8;
  for (int c = threadIdx.x; c < TSA_ROWS * D / 8; c += TSA_THREADS) {
    int r = c / (D / 8), col = (c % (D / 8)) * 8;
    bool ok = r0 + r < w;
    cp_async16(sQ + r * LD + col, ok ? (const void*)(Q + ((size_t)(n - w + r0 + r) * nHeads + h) * D + col) : (const void*)Q,
               ok ? 16 : 0);
  }
}

// Key tile t (slots t*64 ..) of KV head kvh into shared dk; slots >= kEnd zero-filled (finite scores).
template <int D>
__device__ __forceinline__ void tsa_load_k(bf16* dk, const bf16* K, const int* pageTable, int nKv, int kvh, int t,
                                           int kEnd) {
  constexpr int LD = D + 8;
  const bf16* kb = K + ((size_t)pageTable[t] * nKv + kvh) * TSA_BK * D;
  for (int c = threadIdx.x; c < TSA_BK * D / 8; c += TSA_THREADS) {
    int r = c / (D / 8), col = (c % (D / 8)) * 8;
    bool ok = t * TSA_BK + r < kEnd;
    cp_async16(dk + r * LD + col, ok ? (const void*)(kb + r * D + col) : (const void*)K, ok ? 16 : 0);
  }
}

// s (16 rows x 64 keys, mma accumulator layout: row g + 8 * (e >> 1), key i * 8 + 2 * qd + (e & 1)) = Q K^T.
template <int D>
__device__ __forceinline__ void tsa_scores(float (&s)[TSA_BK / 8][4], const unsigned (&qf)[D / 16][4], const bf16* k,
                                           int lane) {
  tile_qk<TSA_BK, D, D + 8>(s, qf, k, lane);
}

// s = the scores of key tile t (in sK's buffer (t - t0) & 1) after tile t + 1 (if < t1) is sent into the
// other buffer. Every thread calls it (barrier); the caller's barrier after its last read of s's buffer
// keeps the next call's prefetch from overwriting it.
template <int D>
__device__ __forceinline__ void tsa_tile_scores(float (&s)[TSA_BK / 8][4], const unsigned (&qf)[D / 16][4], bf16* sK,
                                                const bf16* K, const int* pageTable, int nKv, int kvh, int t, int t0,
                                                int t1, int k1) {
  constexpr int LD = D + 8;
  const int buf = (t - t0) & 1;
  if (t + 1 < t1) tsa_load_k<D>(sK + (buf ^ 1) * TSA_BK * LD, K, pageTable, nKv, kvh, t + 1, k1);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
  tsa_scores<D>(s, qf, sK + buf * TSA_BK * LD, threadIdx.x & 31);
}

// Window rows [r0, r0 + TSA_ROWS) to shared memory and this warp's 16 of them to qf; key tile t0 (if any)
// in flight into sK's first buffer. Every thread calls it (barrier).
template <int D>
__device__ __forceinline__ void tsa_start_rows(unsigned (&qf)[D / 16][4], bf16* sQ, bf16* sK, const bf16* Q,
                                               const bf16* K, const int* pageTable, int n, int nHeads, int nKv, int h,
                                               int kvh, int w, int r0, int t0, int t1, int k1) {
  tsa_load_q<D>(sQ, Q, n, nHeads, h, w, r0);
  cp_async_commit();
  if (t0 < t1) tsa_load_k<D>(sK, K, pageTable, nKv, kvh, t0, k1);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
  tile_q_frags<D, D + 8>(qf, sQ, threadIdx.x & 31, (threadIdx.x >> 5) * 16);
}

// Pass 1. Grid (nHeads, splits); block TSA_THREADS; smem (TSA_ROWS + 2 * TSA_BK) * (D + 8) bf16.
// partMl (nHeads, splits, w, 2) f32: max (log2 units, -inf when no key of the split is visible) and sum.
template <int D>
__device__ __forceinline__ void tsa_proxy_stats(float* partMl, const bf16* Q, const bf16* K, const int* pageTable,
                                                int n, int nHeads, int nKv, int w, int prefix, int chunk, float scale) {
  constexpr int LD = D + 8;
  extern __shared__ __align__(16) unsigned char tsa_smem[];
  bf16* sQ = reinterpret_cast<bf16*>(tsa_smem);  // (TSA_ROWS, LD)
  bf16* sK = sQ + TSA_ROWS * LD;                  // 2 x (TSA_BK, LD)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, qd = lane & 3;
  const int h = blockIdx.x, split = blockIdx.y, splits = gridDim.y, kvh = h / (nHeads / nKv);
  const int k0 = split * chunk, k1 = min(prefix + w, k0 + chunk);  // chunk is a multiple of TSA_BK
  const int t0 = k0 / TSA_BK, t1 = (k1 + TSA_BK - 1) / TSA_BK;
  const float sl2 = scale * TSA_LOG2E;

  for (int r0 = 0; r0 < w; r0 += TSA_ROWS) {
    unsigned qf[D / 16][4];
    tsa_start_rows<D>(qf, sQ, sK, Q, K, pageTable, n, nHeads, nKv, h, kvh, w, r0, t0, t1, k1);
    const int rowA = r0 + warp * 16 + g;  // this thread's window rows rowA and rowA + 8
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // over this thread's key columns only

    for (int t = t0; t < t1; t++) {
      float s[TSA_BK / 8][4];
      tsa_tile_scores<D>(s, qf, sK, K, pageTable, nKv, kvh, t, t0, t1, k1);
      float mNew[2] = {m[0], m[1]};
#pragma unroll
      for (int i = 0; i < TSA_BK / 8; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          int r = rowA + (e >> 1) * 8;
          int key = t * TSA_BK + i * 8 + qd * 2 + (e & 1);
          bool vis = r < w && key < k1 && key <= prefix + r;  // window row r sits at slot prefix + r
          float x = vis ? s[i][e] * sl2 : -INFINITY;
          s[i][e] = x;
          mNew[e >> 1] = fmaxf(mNew[e >> 1], x);
        }
      float mu[2];
#pragma unroll
      for (int j = 0; j < 2; j++) {
        mu[j] = mNew[j] == -INFINITY ? 0.f : mNew[j];
        l[j] *= exp2f(m[j] - mu[j]);  // 0 * 0 while nothing was visible yet
        m[j] = mNew[j];
      }
#pragma unroll
      for (int i = 0; i < TSA_BK / 8; i++) {
        l[0] += exp2f(s[i][0] - mu[0]) + exp2f(s[i][1] - mu[0]);
        l[1] += exp2f(s[i][2] - mu[1]) + exp2f(s[i][3] - mu[1]);
      }
      __syncthreads();  // the buffer just read is refilled by the next iteration's prefetch
    }
    // merge the four lanes (qd) that share a row
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int off = 1; off <= 2; off <<= 1) {
        float mo = __shfl_xor_sync(0xffffffffu, m[j], off), lo = __shfl_xor_sync(0xffffffffu, l[j], off);
        float mn = fmaxf(m[j], mo), mu = mn == -INFINITY ? 0.f : mn;
        l[j] = l[j] * exp2f(m[j] - mu) + lo * exp2f(mo - mu);
        m[j] = mn;
      }
    if (qd == 0) {
#pragma unroll
      for (int j = 0; j < 2; j++) {
        int r = rowA + j * 8;
        if (r < w) {
          float* p = partMl + (((size_t)h * splits + split) * w + r) * 2;
          p[0] = m[j];
          p[1] = l[j];
        }
      }
    }
    __syncthreads();  // sQ is refilled for the next row group
  }
}

extern "C" __global__ void __launch_bounds__(TSA_THREADS)
    tsa_proxy_stats_d64(float* partMl, const bf16* Q, const bf16* K, const int* pageTable, int n, int nHeads, int nKv,
                        int w, int prefix, int chunk, float scale) {
  tsa_proxy_stats<64>(partMl, Q, K, pageTable, n, nHeads, nKv, w, prefix, chunk, scale);
}
extern "C" __global__ void __launch_bounds__(TSA_THREADS)
    tsa_proxy_stats_d128(float* partMl, const bf16* Q, const bf16* K, const int* pageTable, int n, int nHeads, int nKv,
                         int w, int prefix, int chunk, float scale) {
  tsa_proxy_stats<128>(partMl, Q, K, pageTable, n, nHeads, nKv, w, prefix, chunk, scale);
}

// Grid (nHeads); rowStats (nHeads, w, 2) f32 = (max in log2 units, 1 / sum) over all splits, in split order.
extern "C" __global__ void tsa_proxy_combine(float* rowStats, const float* partMl, int splits, int w) {
  const int h = blockIdx.x;
  for (int r = threadIdx.x; r < w; r += blockDim.x) {
    float m = -INFINITY;
    for (int s = 0; s < splits; s++) m = fmaxf(m, partMl[(((size_t)h * splits + s) * w + r) * 2]);
    float l = 0.f;
    for (int s = 0; s < splits; s++) {
      const float* p = partMl + (((size_t)h * splits + s) * w + r) * 2;
      l += p[1] * exp2f(p[0] - m);  // -inf partials add 0; m is finite (slot 0 is visible to every row)
    }
    rowStats[((size_t)h * w + r) * 2] = m;
    rowStats[((size_t)h * w + r) * 2 + 1] = 1.f / l;
  }
}

// Pass 2. Grid (nHeads, splits) over the prefix keys; a (nHeads, prefix) f32 = sum over window rows of
// the softmax probability (not yet divided by w). Every prefix key is visible to every window row.
template <int D>
__device__ __forceinline__ void tsa_proxy_mass(float* a, const float* rowStats, const bf16* Q, const bf16* K,
                                               const int* pageTable, int n, int nHeads, int nKv, int w, int prefix,
                                               int chunk, float scale) {
  constexpr int LD = D + 8;
  extern __shared__ __align__(16) unsigned char tsa_smem[];
  bf16* sQ = reinterpret_cast<bf16*>(tsa_smem);
  bf16* sK = sQ + TSA_ROWS * LD;
  __shared__ float sCol[TSA_THREADS / 32][TSA_BK];  // (warp, key) column sums of the warp's 16 rows
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, qd = lane & 3;
  const int h = blockIdx.x, split = blockIdx.y, kvh = h / (nHeads / nKv);
  const int k0 = split * chunk, k1 = min(prefix, k0 + chunk);
  const int t0 = k0 / TSA_BK, t1 = (k1 + TSA_BK - 1) / TSA_BK;
  const float sl2 = scale * TSA_LOG2E;

  for (int r0 = 0; r0 < w; r0 += TSA_ROWS) {
    unsigned qf[D / 16][4];
    tsa_start_rows<D>(qf, sQ, sK, Q, K, pageTable, n, nHeads, nKv, h, kvh, w, r0, t0, t1, k1);
    const int rowA = r0 + warp * 16 + g;
    float mr[2], il[2];  // rows past the window contribute 0 (il = 0; their zero queries give finite scores)
#pragma unroll
    for (int j = 0; j < 2; j++) {
      int r = rowA + j * 8;
      mr[j] = r < w ? rowStats[((size_t)h * w + r) * 2] : 0.f;
      il[j] = r < w ? rowStats[((size_t)h * w + r) * 2 + 1] : 0.f;
    }

    for (int t = t0; t < t1; t++) {
      float s[TSA_BK / 8][4];
      tsa_tile_scores<D>(s, qf, sK, K, pageTable, nKv, kvh, t, t0, t1, k1);
#pragma unroll
      for (int i = 0; i < TSA_BK / 8; i++) {
        float c0 = exp2f(s[i][0] * sl2 - mr[0]) * il[0] + exp2f(s[i][2] * sl2 - mr[1]) * il[1];
        float c1 = exp2f(s[i][1] * sl2 - mr[0]) * il[0] + exp2f(s[i][3] * sl2 - mr[1]) * il[1];
#pragma unroll
        for (int off = 4; off <= 16; off <<= 1) {  // sum over the 8 row groups g of the warp
          c0 += __shfl_xor_sync(0xffffffffu, c0, off);
          c1 += __shfl_xor_sync(0xffffffffu, c1, off);
        }
        if (g == 0) {
          sCol[warp][i * 8 + qd * 2] = c0;
          sCol[warp][i * 8 + qd * 2 + 1] = c1;
        }
      }
      __syncthreads();
      if (tid < TSA_BK) {
        int key = t * TSA_BK + tid;
        if (key < k1) {
          float sum = 0.f;
#pragma unroll
          for (int wp = 0; wp < TSA_THREADS / 32; wp++) sum += sCol[wp][tid];  // fixed order: deterministic
          size_t idx = (size_t)h * prefix + key;
          a[idx] = r0 == 0 ? sum : a[idx] + sum;
        }
      }
      __syncthreads();  // sCol and the K buffer are rewritten next iteration
    }
  }
}

extern "C" __global__ void __launch_bounds__(TSA_THREADS)
    tsa_proxy_mass_d64(float* a, const float* rowStats, const bf16* Q, const bf16* K, const int* pageTable, int n,
                       int nHeads, int nKv, int w, int prefix, int chunk, float scale) {
  tsa_proxy_mass<64>(a, rowStats, Q, K, pageTable, n, nHeads, nKv, w, prefix, chunk, scale);
}
extern "C" __global__ void __launch_bounds__(TSA_THREADS)
    tsa_proxy_mass_d128(float* a, const float* rowStats, const bf16* Q, const bf16* K, const int* pageTable, int n,
                        int nHeads, int nKv, int w, int prefix, int chunk, float scale) {
  tsa_proxy_mass<128>(a, rowStats, Q, K, pageTable, n, nHeads, nKv, w, prefix, chunk, scale);
}

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

// Grid (x, nHeads), block 256, 16-byte chunks. With len = info[0] + w and f = info[2 + h]:
// Kc/Vc (pages, nHeads, 64, D) bf16 = the head's list entries e at slot e (a paged cache with nKv =
// nHeads and the identity page table); Qc (n, nHeads, D) bf16 row e - f = the query of entry e >= f;
// rowMap (n, nHeads) int (preset to -1) = that row for the chunk row of entry e.
extern "C" __global__ void tsa_gather(bf16* Kc, bf16* Vc, bf16* Qc, int* rowMap, const int* lists, const int* info,
                                      const bf16* Q, const bf16* K, const bf16* V, const int* pageTable, int nHeads,
                                      int nKv, int D, int pageSize, int before, int w) {
  const int h = blockIdx.y, len = info[0] + w, f = info[2 + h], kvh = h / (nHeads / nKv), cpr = D / 8;
  const int* list = lists + (size_t)h * len;
  for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < (long long)len * cpr;
       idx += (long long)gridDim.x * blockDim.x) {
    const int e = (int)(idx / cpr), c = (int)(idx % cpr) * 8, slot = list[e];
    const size_t src = kv_offset(pageTable, slot, kvh, nKv, pageSize, D) + c;
    const size_t dst = (((size_t)(e / 64) * nHeads + h) * 64 + (e % 64)) * D + c;
    *reinterpret_cast<uint4*>(Kc + dst) = *reinterpret_cast<const uint4*>(K + src);
    *reinterpret_cast<uint4*>(Vc + dst) = *reinterpret_cast<const uint4*>(V + src);
    if (e >= f) {
      const int row = slot - before;
      *reinterpret_cast<uint4*>(Qc + ((size_t)(e - f) * nHeads + h) * D + c) =
          *reinterpret_cast<const uint4*>(Q + ((size_t)row * nHeads + h) * D + c);
      if (c == 0) rowMap[(size_t)row * nHeads + h] = e - f;
    }
  }
}

// out (n, nHeads, D) bf16 = Oc row rowMap[r, h] of head h, or zeros where the row is not in the head's list.
extern "C" __global__ void tsa_scatter(bf16* out, const bf16* Oc, const int* rowMap, int n, int nHeads, int D) {
  const int cpr = D / 8;
  for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < (long long)n * nHeads * cpr;
       idx += (long long)gridDim.x * blockDim.x) {
    const long long rh = idx / cpr;
    const int c = (int)(idx % cpr) * 8, h = (int)(rh % nHeads), i = rowMap[rh];
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (i >= 0) v = *reinterpret_cast<const uint4*>(Oc + ((size_t)i * nHeads + h) * D + c);
    *reinterpret_cast<uint4*>(out + rh * D + c) = v;
  }
}

// p (count) int = value, or p[i] = i when iota (the identity page table of the gathered cache).
extern "C" __global__ void tsa_fill_i32(int* p, int count, int value, int iota) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) p[i] = iota ? i : value;
}
