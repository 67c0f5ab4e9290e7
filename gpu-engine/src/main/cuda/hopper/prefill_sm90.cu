// Dense causal prefill attention on Hopper (sm_90a), FlashAttention-3 style, over the paged KV cache
// (page, nKv, 64, headDim) bf16, keys already rotated. Same contract as flash_prefill_d64/_d128
// (prefill_attention.cu, the sm_80 path) and the same CPU twin, attention/DenseAttention: query row
// i of a call sits at slot before + i and sees slots [max(0, before + i + 1 - window), before + i + 1).
//
//   attn_prefill_sm90_d64 / _d128: one block per (128 query rows, KV head), three warpgroups.
//     Warpgroup 0, one thread, is the producer: TMA loads the block's Q tile once, then K and V
//     tiles of 128 keys (two pages, each split into 64-element column halves, 128-byte swizzle)
//     into a 2-stage ring guarded by full/empty mbarriers. Warpgroups 1 and 2 each own 64 query
//     rows: S = Q K^T by wgmma m64n128k16 from shared memory, the online softmax in registers
//     (exp2, running max and sum per row), P converted to bf16 in registers and O += P V by wgmma
//     with A from registers and V read MN-major from shared memory. Each consumer issues the next
//     tile's Q K^T while its previous P V still runs, and the two consumers interleave on the SM,
//     so one's softmax overlaps the other's matrix work.
//   GQA packing: the Q tensor map's box is (64, G heads, 128 / G positions), so the G query heads
//     that share a KV head fill one tile (row r = position r / G, head r % G) and every K/V tile
//     serves all of them. G = nHeads / nKv in {1, 2, 4, 8}.
//   attn_prefill_heads_sm90_*: the same per query head over a gathered cache (Token Sparse
//     Attention): head h's rows are the last len - headFirst[h] of its len entries (G = 1).
// Tiles entirely above the diagonal are never loaded; the last tile's key rows past the end are
// zeroed in shared memory before P V (a stale or poisoned slot times p = 0 must not give NaN).
#include "../common.cuh"
#include "sm90.cuh"

#define AH_BQ 128       // query rows per block (two consumer warpgroups of 64)
#define AH_BK 128       // keys per tile: two pages of 64
#define AH_THREADS 384
#define AH_STAGES 2
#define AH_HALF (AH_BK * 128)  // one 64-column half of a 128-row tile: 16 KB

template <int D>
struct AhLayout {
  static constexpr int HALVES = D / 64;
  static constexpr int TILE = HALVES * AH_HALF;  // Q, K or V tile: 16 KB (d64) or 32 KB (d128)
  static constexpr int Q = 0, K = TILE, V = TILE + AH_STAGES * TILE;
  static constexpr int BARS = TILE + 2 * AH_STAGES * TILE;
  static constexpr int SMEM = BARS + 8 * (1 + 2 * AH_STAGES) + 1024;  // + alignment slack
};

// O (64 rows, D) += P (64, 128 keys, bf16 in registers) V (128 keys, D): 16 keys per k-step, V read
// MN-major (head dims contiguous), its two 64-column halves AH_HALF apart.
template <int D>
__device__ __forceinline__ void pv_tile(float* o, uint32_t (*p)[4], const unsigned char* sV) {
#pragma unroll
  for (int kk = 0; kk < AH_BK / 16; kk++) {
    if constexpr (D == 128) wgmma_rs_n128_t1(o, p[kk], sm90_desc(sV + kk * 2048, AH_HALF, 1024), 1);
    else wgmma_rs_n64_t1(o, p[kk], sm90_desc(sV + kk * 2048, AH_HALF, 1024), 1);
  }
}

template <int D, bool HEADS>
__device__ __forceinline__ void attn_prefill_sm90(const CUtensorMap* mapQ, const CUtensorMap* mapK,
                                                  const CUtensorMap* mapV, bf16* __restrict__ out,
                                                  const int* __restrict__ pageTable, int n, int nHeads, int nKv,
                                                  int gShift, int before, int window, float scale,
                                                  const int* __restrict__ headFirst, int len) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = AhLayout<D>;
  extern __shared__ __align__(1024) unsigned char ah_smem[];
  unsigned char* sm = reinterpret_cast<unsigned char*>(((uintptr_t)ah_smem + 1023) & ~(uintptr_t)1023);
  uint64_t* fullQ = reinterpret_cast<uint64_t*>(sm + L::BARS);
  uint64_t* full = fullQ + 1;
  uint64_t* empty = full + AH_STAGES;

  const int G = 1 << gShift, posPerTile = AH_BQ >> gShift;
  const int qt = gridDim.x - 1 - blockIdx.x;  // heaviest (latest) query tiles first
  const int kvh = blockIdx.y;
  if constexpr (HEADS) {
    before = headFirst[kvh];
    n = len - before;
  }
  const int p0 = qt * posPerTile;  // first query position (row of the call) of this block
  if (p0 >= n) return;             // the whole block, before any barrier
  const int posHere = min(posPerTile, n - p0);
  const int kvEnd = before + p0 + posHere;  // exclusive end of the keys the block's last row sees
  const int kvStart = window > 0 ? max(0, before + p0 + 1 - window) : 0;
  const int t0 = kvStart / AH_BK, t1 = (kvEnd + AH_BK - 1) / AH_BK;
  const int lastPage = (kvEnd - 1) / 64;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    mbar_init(fullQ, 1);
    for (int s = 0; s < AH_STAGES; s++) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 2);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    regs_dealloc<24>();
    if (threadIdx.x == 0) {
      tma_prefetch(mapQ);
      tma_prefetch(mapK);
      tma_prefetch(mapV);
      mbar_expect_tx(fullQ, L::TILE);
#pragma unroll
      for (int h = 0; h < L::HALVES; h++) tma_load_3d(sm + L::Q + h * AH_HALF, mapQ, 64 * h, kvh * G, p0, fullQ);
      for (int t = t0; t < t1; t++) {
        const int i = t - t0, s = i % AH_STAGES;
        mbar_wait(&empty[s], ((i / AH_STAGES) & 1) ^ 1);
        mbar_expect_tx(&full[s], 2 * L::TILE);
#pragma unroll
        for (int j = 0; j < 2; j++) {
          const int page = pageTable[min(2 * t + j, lastPage)];  // past the end: a valid page, zeroed below
          const int row = (page * nKv + kvh) * 64;
#pragma unroll
          for (int h = 0; h < L::HALVES; h++) {
            const int at = s * L::TILE + h * AH_HALF + j * 64 * 128;
            tma_load_2d(sm + L::K + at, mapK, 64 * h, row, &full[s]);
            tma_load_2d(sm + L::V + at, mapV, 64 * h, row, &full[s]);
          }
        }
      }
    }
    return;
  }

  regs_alloc<240>();
  const int c = wg - 1, tid = threadIdx.x - 128 * wg, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  // this thread's two rows of the tile: r = 64 c + 16 warp + g (+ 8)
  const int rowA = 64 * c + 16 * warp + g;
  const int posA = p0 + (rowA >> gShift), posB = p0 + ((rowA + 8) >> gShift);
  const int endA = before + posA + 1, endB = before + posB + 1;  // exclusive key ends of the two rows
  const float sl2 = scale * 1.4426950408889634f;

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; i++) o[i] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  float s[AH_BK / 2];
  uint32_t p[AH_BK / 16][4];  // P of the tile whose P V is in flight: live until the next wait

  mbar_wait(fullQ, 0);
  const unsigned char* sQ = sm + L::Q + c * 64 * 128;
  const int nTiles = t1 - t0;

  // tile i's K and V have landed; the tile past the end gets its key rows beyond kvEnd zeroed in V
  // (both consumers, then a barrier, before either takes its turn: a poisoned slot times p = 0
  // must not give NaN)
  auto landed = [&](int i) {
    const int st = i % AH_STAGES, key0 = (t0 + i) * AH_BK;
    mbar_wait(&full[st], (i / AH_STAGES) & 1);
    if (key0 + AH_BK > kvEnd) {
      unsigned char* sV = sm + L::V + st * L::TILE;
      const int from = kvEnd - key0, chunks = (AH_BK - from) * 8;
      for (int e = tid + 128 * c; e < chunks * L::HALVES; e += 256) {
        const int h = e / chunks, rest = e % chunks;
        *reinterpret_cast<uint4*>(sV + h * AH_HALF + (from + rest / 8) * 128 + (rest % 8) * 16) = make_uint4(0, 0, 0, 0);
      }
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      named_sync(1, 256);
    }
  };
  auto qk = [&](int i) {  // S = Q K^T of tile i
    const unsigned char* sK = sm + L::K + (i % AH_STAGES) * L::TILE;
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
      const int h = ks / 4, k16 = 32 * (ks % 4);
      wgmma_ss_n128(s, sm90_desc(sQ + h * AH_HALF + k16, 16, 1024), sm90_desc(sK + h * AH_HALF + k16, 16, 1024), ks > 0);
    }
  };
  // mask where the tile crosses a row's diagonal or window edge, then the online softmax: P of tile
  // i into p (bf16, the A fragments of P V), O rescaled to the new row maxima
  auto softmax = [&](int i) {
    const int key0 = (t0 + i) * AH_BK;
    const bool edge = key0 + AH_BK > before + p0 + 1 || (window > 0 && key0 < kvEnd - window);
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < AH_BK / 8; j++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        float v = s[4 * j + e] * sl2;
        if (edge) {
          const int key = key0 + 8 * j + 2 * q + (e & 1), end = e < 2 ? endA : endB;
          const int pos = e < 2 ? posA : posB;
          const bool vis = (pos < n) & (key < end) & ((window <= 0) | (key >= end - window));
          v = vis ? v : -INFINITY;
        }
        s[4 * j + e] = v;
        if (e < 2) mx0 = fmaxf(mx0, v);
        else mx1 = fmaxf(mx1, v);
      }
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
    // a row that has seen no visible key yet keeps max -inf: subtract 0 instead (p = 0 anyway)
    const float b0 = n0 == -INFINITY ? 0.f : n0, b1 = n1 == -INFINITY ? 0.f : n1;
    const float r0 = exp2f(m0 - b0), r1 = exp2f(m1 - b1);
    m0 = n0;
    m1 = n1;
    float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
    for (int j = 0; j < AH_BK / 8; j++) {
      const float e0 = exp2f(s[4 * j] - b0), e1 = exp2f(s[4 * j + 1] - b0);
      const float e2 = exp2f(s[4 * j + 2] - b1), e3 = exp2f(s[4 * j + 3] - b1);
      sum0 += e0 + e1;
      sum1 += e2 + e3;
      // the accumulator's 8-column blocks 2k and 2k+1 are the A fragment of k-step k
      p[j / 2][(j & 1) * 2] = pack_bf16(e0, e1);
      p[j / 2][(j & 1) * 2 + 1] = pack_bf16(e2, e3);
    }
    l0 = l0 * r0 + sum0;
    l1 = l1 * r1 + sum1;
#pragma unroll
    for (int j = 0; j < D / 8; j++) {
      o[4 * j] *= r0;
      o[4 * j + 1] *= r0;
      o[4 * j + 2] *= r1;
      o[4 * j + 3] *= r1;
    }
  };

  // Per tile: Q K^T (the previous tile's P V still running beside it), wait for both, free the previous
  // stage, softmax, then issue this tile's P V and go on to the next tile without waiting for it.
  // (Consumers taking turns on the tensor cores through named barriers, FA3's ping-pong, measured
  // slower here: bench/RESULTS.md.)
  for (int i = 0; i < nTiles; i++) {
    landed(i);
    fence_regs<D / 2>(o);
    fence_regs<AH_BK / 4>(&p[0][0]);
    wgmma_fence();
    qk(i);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs<AH_BK / 2>(s);
    fence_regs<D / 2>(o);
    fence_regs<AH_BK / 4>(&p[0][0]);
    if (i > 0 && tid == 0) mbar_arrive(&empty[(i - 1) % AH_STAGES]);
    softmax(i);
    fence_regs<D / 2>(o);
    fence_regs<AH_BK / 4>(&p[0][0]);
    wgmma_fence();
    pv_tile<D>(o, p, sm + L::V + (i % AH_STAGES) * L::TILE);
    wgmma_commit();
    fence_regs<D / 2>(o);
    fence_regs<AH_BK / 4>(&p[0][0]);
  }
  wgmma_wait<0>();
  fence_regs<D / 2>(o);

  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
  const int headA = kvh * G + (rowA & (G - 1)), headB = kvh * G + ((rowA + 8) & (G - 1));
  const int hA = HEADS ? kvh : headA, hB = HEADS ? kvh : headB;
#pragma unroll
  for (int j = 0; j < D / 8; j++) {
    const int col = 8 * j + 2 * q;
    if (posA < n)
      *reinterpret_cast<__nv_bfloat162*>(out + ((size_t)posA * nHeads + hA) * D + col) =
          __floats2bfloat162_rn(o[4 * j] * inv0, o[4 * j + 1] * inv0);
    if (posB < n)
      *reinterpret_cast<__nv_bfloat162*>(out + ((size_t)posB * nHeads + hB) * D + col) =
          __floats2bfloat162_rn(o[4 * j + 2] * inv1, o[4 * j + 3] * inv1);
  }
#else
  __trap();  // launched only on compute capability 9.0
#endif
}

#define AH_ARGS                                                                                              \
  const CUtensorMap *__restrict__ mapQ, const CUtensorMap *__restrict__ mapK,                              \
      const CUtensorMap *__restrict__ mapV, bf16 *out, const int *pageTable

extern "C" __global__ void __launch_bounds__(AH_THREADS, 1)
    attn_prefill_sm90_d64(AH_ARGS, int n, int nHeads, int nKv, int gShift, int before, int window, float scale) {
  attn_prefill_sm90<64, false>(mapQ, mapK, mapV, out, pageTable, n, nHeads, nKv, gShift, before, window, scale,
                               nullptr, 0);
}
extern "C" __global__ void __launch_bounds__(AH_THREADS, 1)
    attn_prefill_sm90_d128(AH_ARGS, int n, int nHeads, int nKv, int gShift, int before, int window, float scale) {
  attn_prefill_sm90<128, false>(mapQ, mapK, mapV, out, pageTable, n, nHeads, nKv, gShift, before, window, scale,
                                nullptr, 0);
}
// Q/out (rows, nHeads, D): row i of head h is query i of that head, at entry headFirst[h] + i of its
// len gathered entries (nKv = nHeads after the gather); gridDim.x covers the largest head's rows.
extern "C" __global__ void __launch_bounds__(AH_THREADS, 1)
    attn_prefill_heads_sm90_d64(AH_ARGS, const int* headFirst, int len, int nHeads, int window, float scale) {
  attn_prefill_sm90<64, true>(mapQ, mapK, mapV, out, pageTable, 0, nHeads, nHeads, 0, 0, window, scale, headFirst,
                              len);
}
extern "C" __global__ void __launch_bounds__(AH_THREADS, 1)
    attn_prefill_heads_sm90_d128(AH_ARGS, const int* headFirst, int len, int nHeads, int window, float scale) {
  attn_prefill_sm90<128, true>(mapQ, mapK, mapV, out, pageTable, 0, nHeads, nHeads, 0, 0, window, scale, headFirst,
                               len);
}
