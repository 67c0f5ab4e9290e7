// What the two soft-vote paths share (ts_votes.cu after the scoring kernels, ts_score_votes.cu fused
// into them): a head's share of a vote by the hardware 2^x, and the merge of a head's per-split
// softmax statistics into (M, 1 / L).
#pragma once
#include "common.cuh"

#define TSV_LOG2E 1.44269504088896341f

// 2^x by the special-function unit (relative error ~2^-22; results below 2^-126 flush to zero, which
// TokenSelectParityTest's 1e-12 absolute near-tie allowance and TsScoreParityTest's 1e-9 cover).
__device__ __forceinline__ float tsv_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// v + exp(x - M) / L with st = (M, 1 / L).
__device__ __forceinline__ float tsv_share(float v, float x, float2 st) {
  return fmaf(tsv_exp2((x - st.x) * TSV_LOG2E), st.y, v);
}

// A statistic written earlier in the same launch (FRESH: the fused vote, through L2) or by an earlier
// launch (the read-only path, whose second pass over a split's statistics hits L1).
template <bool FRESH>
__device__ __forceinline__ float tsv_load(const float* p) {
  return FRESH ? __ldcg(p) : __ldg(p);
}

// sSt[j] = (M, 1 / L) of head headOf(j) for j < count, merged from partMl (heads, splits, 2) f32:
// 8 lanes per head, a max pass and the head's max over its 8 lanes, then a sum pass against that max
// (one 2^x per split, none to combine the lanes), over independent loads, so the block has the
// statistics after one L2 round trip. Whole warps (blockDim a multiple of 32); no barrier after.
template <bool FRESH, typename HeadOf>
__device__ __forceinline__ void tsv_merge_stats(float2* sSt, const float* __restrict__ partMl, int count, int splits,
                                                HeadOf headOf) {
  const int sub = threadIdx.x & 7, per = blockDim.x >> 3;
  for (int j0 = 0; j0 < count; j0 += per) {
    const int j = j0 + (threadIdx.x >> 3);
    const float* pm = partMl + (size_t)headOf(j < count ? j : 0) * splits * 2;
    float mx = -INFINITY;
#pragma unroll 4
    for (int s = sub; s < splits; s += 8) mx = fmaxf(mx, tsv_load<FRESH>(pm + 2 * s));
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));  // all lanes take part
    float sum = 0.f;
    if (mx != -INFINITY) {
#pragma unroll 4
      for (int s = sub; s < splits; s += 8) {
        const float ms = tsv_load<FRESH>(pm + 2 * s), ls = tsv_load<FRESH>(pm + 2 * s + 1);
        if (ms != -INFINITY) sum = fmaf(ls, tsv_exp2((ms - mx) * TSV_LOG2E), sum);
      }
    }
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (sub == 0 && j < count) sSt[j] = make_float2(mx, 1.f / sum);
  }
}
