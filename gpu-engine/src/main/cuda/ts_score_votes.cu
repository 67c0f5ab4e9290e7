// TokenSelect's scoring of the bf16 keys and its soft vote in ONE launch (issue 5 §4): what ts_score_d*
// followed by ts_votes compute, without the logits ever leaving the chip. CPU twin:
// attention/TokenSelect.score. Launch wrapper: io.longsieve.cuda.SelectKernels.scoreVotes;
// SelectKernels.fusedVote says when the host takes this path.
//
// Why: the two-launch path writes every logit (heads x candidates f32: 16 MB at 128K for 32 heads)
// and the vote kernel reads them back, and the vote is a launch whose time is mostly latency. Here
// each block keeps its split's logits in shared memory (group x chunk f32, ~32 KB at 128K with the
// one-wave plan), and the vote follows once the statistics are global:
//  1. score the split (tss_score with SMEM) and publish its softmax statistics (partMl);
//  2. barrier of the splits of KV head g (only the blocks whose statistics it needs);
//  3. merge the group's statistics and turn the split's logits into the group's share of each vote;
//     heads=kvhead (gqa=div: the group's heads are exactly list g's) that share is list g's vote;
//  4. heads=layer: the shares go to pv (nKv, cands) f32, a barrier of the nKv blocks of the split,
//     and block g sums a 1/nKv slice of the split's candidates over the KV heads in order;
//  5. the top-k's first histogram (hist, as ts_votes builds it) from the votes it wrote.
// heads=kvhead with gqa=mod is not fused (list g's heads are scored by other blocks): ts_votes.
// Nor is the int4 copy's scoring (measured on the H200 at 128K: 51 us fused against 48 us in two
// launches): its logits never were its bottleneck, and 128 KB of logits per multiprocessor take the
// L1 capacity its scale loads hit in (L1 hit rate 30% -> 23%, 24% more instructions for the vote's tail).
// The sum of a vote runs in head order as on the CPU, in groups of a KV head's heads under
// heads=layer (a different rounding of the same sum; TsScoreParityTest holds both to 1e-4).
//
// PERSISTENT-KERNEL ASSUMPTION: the barriers spin, so every block of the grid must be resident at
// once. SelectKernels.fusedVote only takes this path when the one-wave plan's nKv x splits blocks fit
// the occupancy the driver reports for this kernel and its shared memory; nothing else may run on
// the GPU beside it that could keep blocks from being resident (as for ts_topk_lists).
#include "common.cuh"
#include "ts_topk.cuh"        // tk_key, TK_BINS, tk_hist_add
#include "ts_topk_block.cuh"  // tk_bar_sync
#include "ts_vote.cuh"        // tsv_share, tsv_merge_stats
// and ts_score.cu (tss_score, tss_head, TSS_GMAX): included before it

#define TSSV_PAD 8  // logits row stride = chunk + 8: the scoring's 4 head rows land on different banks

// votes (lists, cands) f32 and, hist non-null, hist[list][key >> 21] += 1 per vote (ts_votes' contract);
// partMl (heads, splits, 2) f32 as the scoring kernels; pv (nKv, cands) f32 scratch (heads=layer);
// bars (nKv + splits) u32, zero at allocation and left so (tk_bar_sync). Grid (nKv, splits),
// TSS_WARPS * 32 threads, dynamic shared memory group * (chunk + TSSV_PAD) * 4 bytes.
template <int D>
__device__ __forceinline__ void tssv_score_votes(float* __restrict__ votes, unsigned* __restrict__ hist,
                                                 float* __restrict__ partMl, float* __restrict__ pv,
                                                 unsigned* __restrict__ bars, const int* __restrict__ hit,
                                                 const bf16* __restrict__ kPre, const int* __restrict__ pageTable,
                                                 const float* __restrict__ qf, int heads, int nKv, int pageSize,
                                                 int sinks, int cands, int chunk, int gqaMod, float voteScale,
                                                 int perKv, int histStride) {
  extern __shared__ __align__(16) float tssv_logits[];  // (group, stride) the split's logits
  const int stride = chunk + TSSV_PAD;
  tss_score<D, true>(tssv_logits, partMl, hit, kPre, pageTable, qf, heads, nKv, pageSize, sinks, cands, chunk,
                     gqaMod, voteScale, stride);
  if (*hit) return;  // grid-uniform: no block waits at a barrier another skipped
  const int g = blockIdx.x, split = blockIdx.y, splits = gridDim.y, group = heads / nKv;
  const int c0 = split * chunk, n = max(0, min(cands, c0 + chunk) - c0);  // the split's candidates [c0, c0 + n)

  // 2., 3. the group's statistics once every split of KV head g has published its own
  tk_bar_sync(bars + g, splits, split == 0);
  __shared__ float2 sSt[TSS_GMAX];  // (M, 1 / L) of head slot j
  __shared__ unsigned sHist[TK_BINS];
  tsv_merge_stats<true>(sSt, partMl, group, splits, [&](int j) { return tss_head(g, j, group, nKv, gqaMod); });
  if (hist)
    for (int i = threadIdx.x; i < TK_BINS; i += blockDim.x) sHist[i] = 0u;
  __syncthreads();
  float* share = (perKv ? votes : pv) + (size_t)g * cands + c0;
  for (int i0 = 0; i0 < n; i0 += blockDim.x) {  // block-uniform: tk_hist_add takes whole warps
    const int i = i0 + threadIdx.x;
    float v = 0.f;
    if (i < n) {
      for (int j = 0; j < group; j++) v = tsv_share(v, tssv_logits[j * stride + i], sSt[j]);
      share[i] = v;
    }
    if (perKv && hist) tk_hist_add(sHist, i < n, tk_key(v) >> 21);
  }

  // 4. heads=layer: block g of the split sums slice g of its candidates over the KV heads' shares
  if (!perKv) {
    tk_bar_sync(bars + nKv + split, nKv, g == 0);
    const int per = (n + nKv - 1) / nKv, s0 = min(n, g * per), s1 = min(n, s0 + per);
    for (int i0 = s0; i0 < s1; i0 += blockDim.x) {  // block-uniform
      const int i = i0 + threadIdx.x;
      float v = 0.f;
      if (i < s1) {
        const float* p = pv + c0 + i;
#pragma unroll 8
        for (int k = 0; k < nKv; k++) v += __ldcg(p + (size_t)k * cands);
        votes[c0 + i] = v;
      }
      if (hist) tk_hist_add(sHist, i < s1, tk_key(v) >> 21);
    }
  }

  // 5. the block's histogram into the list's (one global atomic per non-zero bin)
  if (hist) {
    __syncthreads();
    unsigned* gh = hist + (size_t)(perKv ? g : 0) * histStride;
    for (int i = threadIdx.x; i < TK_BINS; i += blockDim.x) {
      const unsigned c = sHist[i];
      if (c != 0u) atomicAdd(&gh[i], c);
    }
  }
}

#define TS_SCORE_VOTES(D)                                                                                          \
  extern "C" __global__ void __launch_bounds__(TSS_WARPS * 32, 4)                                                  \
      ts_score_votes_d##D(float* votes, unsigned* hist, float* partMl, float* pv, unsigned* bars, const int* hit,  \
                          const bf16* kPre, const int* pageTable, const float* qf, int heads, int nKv, int pageSize, \
                          int sinks, int cands, int chunk, int gqaMod, float voteScale, int perKv, int histStride) {   \
    tssv_score_votes<D>(votes, hist, partMl, pv, bars, hit, kPre, pageTable, qf, heads, nKv, pageSize, sinks, cands, \
                        chunk, gqaMod, voteScale, perKv, histStride);                                               \
  }
TS_SCORE_VOTES(16)
TS_SCORE_VOTES(32)
TS_SCORE_VOTES(64)
TS_SCORE_VOTES(128)
TS_SCORE_VOTES(256)
