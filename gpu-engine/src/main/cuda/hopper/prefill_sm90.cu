// Dense causal prefill attention on Hopper (sm_90a), FlashAttention-3 style, over the paged KV cache
// (page, nKv, 64, headDim) bf16, keys already rotated. Same contract as flash_prefill_d64/_d128
// (prefill_attention.cu, the sm_80 path) and the same CPU twin, attention/DenseAttention: query row
// i of a call sits at slot before + i and sees slots [max(0, before + i + 1 - window), before + i + 1).
//
//   attn_prefill_sm90_d64 / _d128: one block per (128 query rows, KV head), three warpgroups.
//     Warpgroup 0, one thread, is the producer: TMA loads the block's Q tile once, then K and V
//     tiles of 128 keys (two pages, each split into 64-element column halves, 128-byte swizzle)
//     into 2-stage K and V rings guarded by full/empty mbarriers, in the order the consumers use
//     them (K of tile i, then V of tile i - 1). Warpgroups 1 and 2 each own 64 query rows, with Q
//     in registers: S = Q K^T by wgmma m64n128k16 (A from registers), the online softmax in
//     registers (exp2, running max and sum per row, reductions as trees), P converted to bf16 in
//     registers and O += P V by wgmma with V read MN-major from shared memory. FA3's two
//     schedules: within a consumer, Q K^T of tile i and P V of tile i - 1 are issued together and
//     tile i's softmax runs while that P V is still on the tensor cores; between the consumers,
//     named barriers make them take turns issuing, so one's softmax overlaps the other's products.
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
#define AH_HALF (AH_BK * 128)  // one 64-column half of a 128-row tile: 16 KB
#ifndef AH_STAGES
#define AH_STAGES 2  // K and V tiles in flight each (3 measured no faster at d128: bench/RESULTS.md)
#endif

// Shared memory: Q, then STAGES K tiles, then STAGES V tiles, then the barriers. K and V have rings of
// their own because a K tile is done one tile before its V tile (Q K^T of tile i runs beside P V of i - 1).
template <int D>
struct AhLayout {
  static constexpr int STAGES = AH_STAGES;
  static constexpr int HALVES = D / 64;
  static constexpr int TILE = HALVES * AH_HALF;  // Q, K or V tile: 16 KB (d64) or 32 KB (d128)
  static constexpr int Q = 0, K = TILE, V = TILE + STAGES * TILE;
  static constexpr int BARS = TILE + 2 * STAGES * TILE;
  static constexpr int SMEM = BARS + 8 * (1 + 4 * STAGES) + 1024;  // + alignment slack
};

__device__ __forceinline__ float ex2(float x) {  // 2^x, one MUFU op; ex2(-inf) = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

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

// Folds 2W slots to 2 as a tree (row A's values at even slots, row B's at odd): a chain of 32
// dependent ops would be the longest latency of the softmax.
template <int W, class F>
__device__ __forceinline__ void pair_tree(float* t, F op) {
#pragma unroll
  for (int j = 0; j < W; j += 2) {
    t[j] = op(t[j], t[j + W]);
    t[j + 1] = op(t[j + 1], t[j + 1 + W]);
  }
  if constexpr (W > 2) pair_tree<W / 2>(t, op);
}

template <int D, bool HEADS>
__device__ __forceinline__ void attn_prefill_sm90(const CUtensorMap* mapQ, const CUtensorMap* mapK,
                                                  const CUtensorMap* mapV, bf16* __restrict__ out,
                                                  const int* __restrict__ pageTable, int n, int nHeads, int nKv,
                                                  int gShift, int before, int window, float scale,
                                                  const int* __restrict__ headFirst, int len) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = AhLayout<D>;
  constexpr int S = L::STAGES;
  extern __shared__ __align__(1024) unsigned char ah_smem[];
  unsigned char* sm = reinterpret_cast<unsigned char*>(((uintptr_t)ah_smem + 1023) & ~(uintptr_t)1023);
  uint64_t* fullQ = reinterpret_cast<uint64_t*>(sm + L::BARS);
  uint64_t* fullK = fullQ + 1;
  uint64_t* fullV = fullK + S;
  uint64_t* emptyK = fullV + S;
  uint64_t* emptyV = emptyK + S;

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
  const int nTiles = t1 - t0;
  const int lastPage = (kvEnd - 1) / 64;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    mbar_init(fullQ, 1);
    for (int s = 0; s < S; s++) {
      mbar_init(&fullK[s], 1);
      mbar_init(&fullV[s], 1);
      mbar_init(&emptyK[s], 2);
      mbar_init(&emptyV[s], 2);
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
      // tile i's K, then tile i - 1's V: the order the consumers use them in
      auto load = [&](const CUtensorMap* map, int base, uint64_t* full, uint64_t* empty, int i) {
        const int s = i % S, t = t0 + i;
        mbar_wait(&empty[s], ((i / S) & 1) ^ 1);
        mbar_expect_tx(&full[s], L::TILE);
#pragma unroll
        for (int j = 0; j < 2; j++) {
          const int page = pageTable[min(2 * t + j, lastPage)];  // past the end: a valid page, zeroed below
          const int row = (page * nKv + kvh) * 64;
#pragma unroll
          for (int h = 0; h < L::HALVES; h++)
            tma_load_2d(sm + base + s * L::TILE + h * AH_HALF + j * 64 * 128, map, 64 * h, row, &full[s]);
        }
      };
      for (int i = 0; i <= nTiles; i++) {
        if (i < nTiles) load(mapK, L::K, fullK, emptyK, i);
        if (i > 0) load(mapV, L::V, fullV, emptyV, i - 1);
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
  const float sl2 = scale * 1.4426950408889634f;                 // scores to log2 units

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; i++) o[i] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // running max (log2 units) and sum
  float r0 = 1.f, r1 = 1.f;                                  // O's rescale for the tile in softmax
  float s[AH_BK / 2];
  uint32_t p[AH_BK / 16][4];  // P of the tile whose P V is next or in flight

  mbar_wait(fullQ, 0);
  const unsigned char* sQ = sm + L::Q + c * 64 * 128;
  // Q's A fragments, k-step ks: lane l reads row 16 warp + l % 16, 16-byte chunk 2 (ks % 4) + l / 16
  // of its 64-column half, through the 128-byte swizzle (chunk ^ row % 8)
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++) {
    const int row = 16 * warp + (lane & 15), chunk = 2 * (ks % 4) + (lane >> 4);
    const uint32_t at = smem_u32(sQ + (ks / 4) * AH_HALF + row * 128 + ((chunk ^ (row & 7)) << 4));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(qf[ks][0]), "=r"(qf[ks][1]), "=r"(qf[ks][2]), "=r"(qf[ks][3])
                 : "r"(at));
  }

  auto waitK = [&](int i) { mbar_wait(&fullK[i % S], (i / S) & 1); };
  // tile i's V has landed; in the tile past the end, the key rows beyond kvEnd are zeroed (both
  // consumers, then a barrier, before either multiplies: a poisoned slot times p = 0 must not give NaN)
  auto waitV = [&](int i) {
    const int st = i % S, key0 = (t0 + i) * AH_BK;
    mbar_wait(&fullV[st], (i / S) & 1);
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
  auto release = [&](uint64_t* empty, int i) {
    if (tid == 0) mbar_arrive(&empty[i % S]);
  };
  auto qk = [&](int i) {  // S = Q K^T of tile i
    const unsigned char* sK = sm + L::K + (i % S) * L::TILE;
#pragma unroll
    for (int ks = 0; ks < D / 16; ks++) {
      const int h = ks / 4, k16 = 32 * (ks % 4);
      wgmma_rs_n128_t0(s, qf[ks], sm90_desc(sK + h * AH_HALF + k16, 16, 1024), ks > 0);
    }
  };
  // Consumers take turns issuing their matrix work (FA3's ping-pong), so one's softmax runs while the
  // other's products fill the tensor cores: barrier 2 + c is consumer c's turn, given by the other.
  auto takeTurn = [&]() { named_sync(2 + c, 256); };
  auto giveTurn = [&](bool last) {
    if (!(last && c == 1)) named_arrive(2 + (c ^ 1), 256);  // consumer 0 takes no turn after the last
  };
  // Masks where tile i crosses a row's diagonal or window edge, then the online softmax in place:
  // s becomes 2^(score - row max), the running max and sum move on, r0/r1 say how to rescale O.
  // Touches neither O nor P: the previous tile's P V may still be running.
  auto softmax = [&](int i) {
    const int key0 = (t0 + i) * AH_BK;
    const bool edge = key0 + AH_BK > before + p0 + 1 || (window > 0 && key0 < kvEnd - window);
    if (edge) {
#pragma unroll
      for (int j = 0; j < AH_BK / 8; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int key = key0 + 8 * j + 2 * q + (e & 1), end = e < 2 ? endA : endB;
          const int pos = e < 2 ? posA : posB;
          const bool vis = (pos < n) & (key < end) & ((window <= 0) | (key >= end - window));
          s[4 * j + e] = vis ? s[4 * j + e] : -INFINITY;
        }
      }
    }
    // row maxima as trees, not chains: the dependent-latency path is what the other warpgroup's
    // matrix work has to cover
    float t[AH_BK / 4];
#pragma unroll
    for (int j = 0; j < AH_BK / 8; j++) {
      t[2 * j] = fmaxf(s[4 * j], s[4 * j + 1]);
      t[2 * j + 1] = fmaxf(s[4 * j + 2], s[4 * j + 3]);
    }
    pair_tree<AH_BK / 8>(t, [](float a, float b) { return fmaxf(a, b); });
    float mx0 = t[0], mx1 = t[1];
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float n0 = fmaxf(m0, mx0 * sl2), n1 = fmaxf(m1, mx1 * sl2);
    // a row that has seen no visible key yet keeps max -inf: subtract 0 instead (p = 0 anyway)
    const float b0 = n0 == -INFINITY ? 0.f : n0, b1 = n1 == -INFINITY ? 0.f : n1;
    r0 = ex2(m0 - b0);
    r1 = ex2(m1 - b1);
    m0 = n0;
    m1 = n1;
#pragma unroll
    for (int j = 0; j < AH_BK / 8; j++) {
      s[4 * j] = ex2(fmaf(s[4 * j], sl2, -b0));
      s[4 * j + 1] = ex2(fmaf(s[4 * j + 1], sl2, -b0));
      s[4 * j + 2] = ex2(fmaf(s[4 * j + 2], sl2, -b1));
      s[4 * j + 3] = ex2(fmaf(s[4 * j + 3], sl2, -b1));
      t[2 * j] = s[4 * j] + s[4 * j + 1];
      t[2 * j + 1] = s[4 * j + 2] + s[4 * j + 3];
    }
    pair_tree<AH_BK / 8>(t, [](float a, float b) { return a + b; });
    l0 = l0 * r0 + t[0];
    l1 = l1 * r1 + t[1];
  };
  // After the previous P V has finished: O rescaled to the new maxima, P of this tile into p (bf16;
  // the accumulator's 8-column blocks 2k and 2k+1 are the A fragment of k-step k).
  auto rescaleAndPack = [&]() {
#pragma unroll
    for (int j = 0; j < D / 8; j++) {
      o[4 * j] *= r0;
      o[4 * j + 1] *= r0;
      o[4 * j + 2] *= r1;
      o[4 * j + 3] *= r1;
    }
#pragma unroll
    for (int j = 0; j < AH_BK / 8; j++) {
      p[j / 2][(j & 1) * 2] = pack_bf16(s[4 * j], s[4 * j + 1]);
      p[j / 2][(j & 1) * 2 + 1] = pack_bf16(s[4 * j + 2], s[4 * j + 3]);
    }
  };

  // FA3's intra-warpgroup schedule: Q K^T of tile i and P V of tile i - 1 are issued together, and
  // tile i's softmax runs while that P V is still on the tensor cores.
  if (c == 1) named_arrive(2, 256);  // consumer 0 goes first
  waitK(0);
  takeTurn();
  wgmma_fence();
  qk(0);
  wgmma_commit();
  giveTurn(false);
  wgmma_wait<0>();
  fence_regs<AH_BK / 2>(s);
  release(emptyK, 0);
  softmax(0);
  rescaleAndPack();
  for (int i = 1; i < nTiles; i++) {
    waitK(i);
    waitV(i - 1);
    fence_regs<D / 2>(o);
    fence_regs<AH_BK / 4>(&p[0][0]);
    takeTurn();
    wgmma_fence();
    qk(i);
    wgmma_commit();
    pv_tile<D>(o, p, sm + L::V + ((i - 1) % S) * L::TILE);
    wgmma_commit();
    giveTurn(false);
    wgmma_wait<1>();
    fence_regs<AH_BK / 2>(s);
    release(emptyK, i);
    softmax(i);
    wgmma_wait<0>();
    fence_regs<D / 2>(o);
    fence_regs<AH_BK / 4>(&p[0][0]);
    release(emptyV, i - 1);
    rescaleAndPack();
  }
  waitV(nTiles - 1);
  fence_regs<D / 2>(o);
  fence_regs<AH_BK / 4>(&p[0][0]);
  takeTurn();
  wgmma_fence();
  pv_tile<D>(o, p, sm + L::V + ((nTiles - 1) % S) * L::TILE);
  wgmma_commit();
  giveTurn(true);
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
