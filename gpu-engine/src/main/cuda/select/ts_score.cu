// TokenSelect scoring on tensor cores (issue 5 §4): the vote logits voteScale * qf_h . k of every
// candidate key, for all query heads of a KV head at once, plus per-split softmax statistics (the
// soft vote over them: ts_votes.cu). CPU twin: cpu/policy/TokenSelect.score. Launch wrappers: io.longsieve.cuda.kernels.SelectKernels.
//
// Why tensor cores: the scoring is a (group x D) by (D x keys) product per KV head; with the keys
// read once per KV head the FMAs are nothing next to the bytes, but a CUDA-core version spends its
// time in shuffles and conversions and reaches only a quarter of the copy bandwidth. Here one
// m16n8k16 mma takes 8 keys x 16 dims for all (<= 8) heads of the group.
//
// fp32 accuracy from bf16 mma: the query is split into hi = bf16(q) and lo = bf16(q - hi); rows
// 0..7 of the A tile hold the heads' hi parts and rows 8..15 their lo parts, so one mma gives both
// and the logit is row j + row j + 8 of the same thread (error ~2^-17 |q||k| instead of bf16's 2^-9).
// Keys are bf16 (exact); the int4 copy (small integers, exact in bf16) is scored by ts_score_int4.cu,
// which reuses the layout helpers (ts_score.cuh) with the mma's roles swapped.
//
// No shared memory for the keys: a lane loads its own part of a key straight into the registers of
// the mma's B fragment. The dot product does not care in which order the dims are summed, so the
// dims are permuted to make the loads wide and coalesced (4 lanes read 64 contiguous bytes of one
// key) and the query fragments are gathered with the same permutation (ts_dim). Every warp keeps
// U groups of 8 keys in flight; 4 warps per block, about 4 blocks per multiprocessor.
#include "../common/common.cuh"
#include "ts_score.cuh"  // TSS_* sizes and the layout helpers, shared with ts_score_int4.cu
#include "../common/step_sizes.cuh"


// Scoring, grid (nKv, splits), TSS_WARPS * 32 threads: block (g, split) reads the keys of KV head g
// for candidates [split * chunk, +chunk) once and scores them for all `group` query heads of g:
// logits (heads, cands) f32 = voteScale * qf_h . k(sinks + c); partMl (heads, splits, 2) f32 the
// split's softmax (max, sum) per head, from the paged kPre (pageSize a power of two). The int4
// copy has its own kernel (ts_score_int4.cu), which shares the layout helpers (ts_score.cuh).
template <int D>
__device__ __forceinline__ void tss_score(float* __restrict__ logits, float* __restrict__ partMl,
                                          const int* __restrict__ hit, const bf16* __restrict__ kPre,
                                          const int* __restrict__ pageTable, const float* __restrict__ qf, int heads,
                                          int nKv, int pageSize, int sinks, int cands, int chunk, int gqaMod,
                                          float voteScale, const int* __restrict__ step) {
  cands = step_size(step, STEP_CANDS, cands);  // its load goes out with the flag's
  if (*hit) return;
  constexpr bool INT4 = false;  // tss_dim / TssLayout's bf16 case
  using Lay = TssLayout<D, INT4>;
  constexpr int W = Lay::W, U = Lay::U, KS = D / 16;
  const int g = blockIdx.x, split = blockIdx.y, splits = gridDim.y, group = heads / nKv;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r = lane >> 2, t = lane & 3;  // r: A/C row (head r) and B column (key r of a group); t: quad lane
  const bool rowOn = r < group;
  const int h = tss_head(g, rowOn ? r : 0, group, nKv, gqaMod);

  // A fragments: rows r (hi) and r + 8 (lo) of head r at the permuted dims; zero rows past the group
  unsigned a[KS][4];
  {
    const float* q = qf + (size_t)h * D;
#pragma unroll
    for (int kk = 0; kk < KS; kk++)
#pragma unroll
      for (int p = 0; p < 2; p++) {  // p 0: elements 0, 1 (a0, a1); p 1: elements 2, 3 (a2, a3)
        float x0 = rowOn ? q[tss_dim<D, INT4>(kk, 2 * p, t)] : 0.f;
        float x1 = rowOn ? q[tss_dim<D, INT4>(kk, 2 * p + 1, t)] : 0.f;
        float h0 = bf2f(f2bf(x0)), h1 = bf2f(f2bf(x1));
        a[kk][2 * p] = pack_bf16(h0, h1);
        a[kk][2 * p + 1] = pack_bf16(x0 - h0, x1 - h1);
      }
  }

  const int lo = sinks + split * chunk, hi = sinks + min(cands, split * chunk + chunk);  // slots of the split
  const int s0 = lo & ~7;                         // groups of 8 aligned slots: never across a page
  const int nGroups = lo < hi ? (hi - s0 + 7) / 8 : 0;
  const int nIt = (nGroups + U - 1) / U;
  // the split's page-table entries in shared memory: a key load then waits on one global round
  // trip, not two (a split longer than TSS_PAGES pages reads the table from global memory)
  __shared__ int sPage[TSS_PAGES];
  const int pShift = __ffs(pageSize) - 1;  // pageSize a power of two (SelectKernels.score checks)
  const int p0 = s0 >> pShift;
  const int nPages = lo >= hi ? 0 : ((hi - 1) >> pShift) - p0 + 1;
  const bool staged = nPages <= TSS_PAGES;
  if (staged)
    for (int i = threadIdx.x; i < nPages; i += TSS_WARPS * 32) sPage[i] = pageTable[p0 + i];
  __syncthreads();
  float m[1] = {-INFINITY}, l[1] = {0.f};  // head r's statistics over the keys this lane accounts
  for (int it = warp; it < nIt; it += TSS_WARPS) {  // warp-uniform: the mma needs the whole warp
    unsigned kw[U][Lay::WORDS];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int base = s0 + (it * U + u) * 8, slot = base + r;
      const bool ok = slot >= lo && slot < hi;
      size_t off = 0;
      if (ok) {
        const int page = staged ? sPage[(slot >> pShift) - p0] : pageTable[slot >> pShift];
        off = (((size_t)page * nKv + g) * pageSize + (slot & (pageSize - 1))) * D;  // kv_offset's layout
      }
      const unsigned char* row = reinterpret_cast<const unsigned char*>(kPre + off);
#pragma unroll
      for (int i = 0; i < Lay::CHUNKS; i++) {
        const int byteOff = (i * 4 * W + t * W) * 2;
        tss_load<Lay::CB>(&kw[u][i * Lay::WPC], row + byteOff, ok);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int kk = 0; kk < KS; kk++) mma_bf16(c, a[kk], kw[u][2 * kk], kw[u][2 * kk + 1]);
      // c[e] (row r, key 2t + e) + c[2 + e] (row r + 8): head r's logit of slot base + 2t + e
      const int base = s0 + (it * U + u) * 8;
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int se = base + 2 * t + e;
        if (rowOn && se >= lo && se < hi) {
          float dot = c[e] + c[2 + e];
          float s = voteScale * dot;
          logits[(size_t)h * cands + (se - sinks)] = s;
          tss_online(m[0], l[0], s);
        }
      }
    }
  }
  // the quad of row r (lanes 1, 2 apart) holds head r's statistics: merge it, then the warps
  tss_split_stats<1, 1, 2>(partMl, m, l, t == 0, r, 0, g, group, nKv, gqaMod, split, splits);
}

#define TS_SCORE(D)                                                                                               \
  extern "C" __global__ void __launch_bounds__(TSS_WARPS * 32, 4)                                                 \
      ts_score_d##D(float* logits, float* partMl, const int* hit, const bf16* kPre, const int* pageTable,         \
                    const float* qf, int heads, int nKv, int pageSize, int sinks, int cands, int chunk, int gqaMod, \
                    float voteScale, const int* step) {                                                           \
    tss_score<D>(logits, partMl, hit, kPre, pageTable, qf, heads, nKv, pageSize, sinks, cands, chunk, gqaMod,    \
                 voteScale, step);                                                                                \
  }
TS_SCORE(16)
TS_SCORE(32)
TS_SCORE(64)
TS_SCORE(128)
TS_SCORE(256)
