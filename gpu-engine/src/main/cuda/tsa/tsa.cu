// Token Sparse Attention for prefill (issue 5 §1). CPU twin: cpu/policy/TokenSparseAttention.
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
// Three files, one per kind of work, so each reads in a sitting:
//   tsa.cu         (this file) the proxy scores: passes 1 and 2 and their combine, tensor-core tiles
//   tsa_select.cu  pooling, head mean and the two block-wide radix selections (keep count, lists)
//   tsa_gather.cu  the copies around the dense prefill kernel (gather, scatter, fills)
#include "../common/attn_tile.cuh"

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
