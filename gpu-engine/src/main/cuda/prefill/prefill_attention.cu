// Dense causal prefill attention on tensor cores over the paged KV cache (page, nKv, pageSize,
// headDim) bf16, keys already rotated (the krope copy). Query row i of a call sits at slot
// `before + i` and sees slots [max(0, before + i + 1 - window), before + i + 1) (window 0: no
// sliding window). GQA: query head h reads KV head h / (nHeads / nKv). CPU twin:
// cpu/policy/DenseAttention.
//   flash_prefill_d64 / _d128: mma.sync flash attention, 64 queries x one head per block, online
//       softmax in registers, K/V tiles of one page (pageSize must be 64), double buffered with
//       cp.async; no L x L matrix anywhere.
//   flash_prefill_heads_d64 / _d128: the same per query head on a gathered cache (Token Sparse
//       Attention, tsa.cu): head h's rows are the last len - headFirst[h] of its len cached entries.
#include "../common/attn_tile.cuh"

#define FA_BQ 64
#define FA_BK 64
#define FA_THREADS 128

// HEADS: per-head row counts (n = len - headFirst[h], before = headFirst[h]); blocks past a head's rows exit.
template <int D, bool HEADS>
__device__ __forceinline__ void flash_prefill(bf16* __restrict__ out, const bf16* __restrict__ Q,
                                              const bf16* __restrict__ K, const bf16* __restrict__ V,
                                              const int* __restrict__ pageTable, int n, int nHeads, int nKv,
                                              int before, int window, float scale,
                                              const int* __restrict__ headFirst = nullptr, int len = 0) {
  constexpr int LD = D + 8;  // padded rows: ldmatrix rows land in distinct bank groups
  extern __shared__ __align__(16) unsigned char fa_smem[];
  bf16* sQ = reinterpret_cast<bf16*>(fa_smem);  // (FA_BQ, LD)
  bf16* sK = sQ + FA_BQ * LD;                    // 2 x (FA_BK, LD)
  bf16* sV = sK + 2 * FA_BK * LD;                // 2 x (FA_BK, LD)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int qt = gridDim.x - 1 - blockIdx.x;  // heaviest (latest) query tiles first
  const int h = blockIdx.y, kvh = h / (nHeads / nKv);
  const int q0 = qt * FA_BQ;
  if constexpr (HEADS) {
    before = headFirst[h];
    n = len - before;
    if (q0 >= n) return;  // the whole block: before any barrier
  }
  const int rowsHere = min(FA_BQ, n - q0);
  const int kvEnd = before + q0 + rowsHere;  // exclusive end for the block's last row
  int kvStart = window > 0 ? max(0, before + q0 + 1 - window) : 0;
  const int t0 = kvStart / FA_BK, t1 = (kvEnd + FA_BK - 1) / FA_BK;

  // Q tile → shared → registers
  for (int c = tid; c < FA_BQ * D / 8; c += FA_THREADS) {
    int r = c / (D / 8), col = (c % (D / 8)) * 8;
    bool ok = r < rowsHere;
    cp_async16(sQ + r * LD + col, ok ? (const void*)(Q + ((size_t)(q0 + r) * nHeads + h) * D + col) : (const void*)Q,
               ok ? 16 : 0);
  }
  cp_async_commit();

  auto loadKV = [&](int buf, int t) {
    const int page = pageTable[t];
    const bf16* kb = K + ((size_t)page * nKv + kvh) * FA_BK * D;
    const bf16* vb = V + ((size_t)page * nKv + kvh) * FA_BK * D;
    bf16* dk = sK + buf * FA_BK * LD;
    bf16* dv = sV + buf * FA_BK * LD;
    for (int c = tid; c < FA_BK * D / 8; c += FA_THREADS) {
      int r = c / (D / 8), col = (c % (D / 8)) * 8;
      bool ok = t * FA_BK + r < kvEnd;  // rows past the end are zero-filled: 0 * garbage must not be NaN
      cp_async16(dk + r * LD + col, ok ? (const void*)(kb + r * D + col) : (const void*)K, ok ? 16 : 0);
      cp_async16(dv + r * LD + col, ok ? (const void*)(vb + r * D + col) : (const void*)V, ok ? 16 : 0);
    }
  };
  if (t0 < t1) loadKV(0, t0);
  cp_async_commit();

  cp_async_wait<1>();
  __syncthreads();
  unsigned qf[D / 16][4];
  tile_q_frags<D, LD>(qf, sQ, lane, warp * 16);

  float o[D / 8][4], mRow[2], lRow[2];
  tile_init<D>(o, mRow, lRow);
  const float sl2 = scale * 1.4426950408889634f;  // scores in log2 units: exp2f below
  const int g = lane >> 2, qd = lane & 3;
  const int rowA = q0 + warp * 16 + g;  // this thread's two query rows: rowA and rowA + 8

  for (int t = t0; t < t1; t++) {
    const int buf = (t - t0) & 1;
    if (t + 1 < t1) loadKV(buf ^ 1, t + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const bf16* k = sK + buf * FA_BK * LD;
    const bf16* v = sV + buf * FA_BK * LD;

    float s[FA_BK / 8][4];
    tile_qk<FA_BK, D, LD>(s, qf, k, lane);
    // mask, running max, rescale, then O += P V
    tile_softmax<FA_BK, D>(s, o, mRow, lRow, [&](int i, int e, float sv) {
      int r = rowA + (e >> 1) * 8;
      int key = t * FA_BK + i * 8 + qd * 2 + (e & 1);
      int end = before + r + 1;
      // non-short-circuit: one predicate expression, no branch on window for the compiler to unswitch the
      // tile loop on (that copy cost prefill registers)
      bool vis = (r < n) & (key < end) & ((window <= 0) | (key >= end - window));
      return vis ? sv * sl2 : -INFINITY;
    });
    tile_pv<FA_BK, D, LD>(o, s, v, lane);
    __syncthreads();  // the buffer just read is refilled by the next iteration's prefetch
  }

  tile_row_sums(lRow);
  float inv0 = lRow[0] > 0.f ? 1.f / lRow[0] : 0.f, inv1 = lRow[1] > 0.f ? 1.f / lRow[1] : 0.f;
#pragma unroll
  for (int i = 0; i < D / 8; i++) {
    int col = i * 8 + qd * 2;
    if (rowA < n) {
      *reinterpret_cast<__nv_bfloat162*>(out + ((size_t)rowA * nHeads + h) * D + col) =
          __floats2bfloat162_rn(o[i][0] * inv0, o[i][1] * inv0);
    }
    if (rowA + 8 < n) {
      *reinterpret_cast<__nv_bfloat162*>(out + ((size_t)(rowA + 8) * nHeads + h) * D + col) =
          __floats2bfloat162_rn(o[i][2] * inv1, o[i][3] * inv1);
    }
  }
}

extern "C" __global__ void __launch_bounds__(FA_THREADS)
    flash_prefill_d64(bf16* out, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable, int n,
                      int nHeads, int nKv, int before, int window, float scale) {
  flash_prefill<64, false>(out, Q, K, V, pageTable, n, nHeads, nKv, before, window, scale);
}
extern "C" __global__ void __launch_bounds__(FA_THREADS)
    flash_prefill_d128(bf16* out, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable, int n,
                       int nHeads, int nKv, int before, int window, float scale) {
  flash_prefill<128, false>(out, Q, K, V, pageTable, n, nHeads, nKv, before, window, scale);
}
// Q/out (rows, nHeads, D) with row i of head h at list entry headFirst[h] + i; the cache holds len
// entries per head (nKv = nHeads after the gather); gridDim.x covers the largest head's rows.
extern "C" __global__ void __launch_bounds__(FA_THREADS)
    flash_prefill_heads_d64(bf16* out, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable,
                            const int* headFirst, int len, int nHeads, int window, float scale) {
  flash_prefill<64, true>(out, Q, K, V, pageTable, 0, nHeads, nHeads, 0, window, scale, headFirst, len);
}
extern "C" __global__ void __launch_bounds__(FA_THREADS)
    flash_prefill_heads_d128(bf16* out, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable,
                             const int* headFirst, int len, int nHeads, int window, float scale) {
  flash_prefill<128, true>(out, Q, K, V, pageTable, 0, nHeads, nHeads, 0, window, scale, headFirst, len);
}

