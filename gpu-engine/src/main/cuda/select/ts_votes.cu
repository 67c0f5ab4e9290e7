// TokenSelect's soft vote on the GPU (issue 5 §4): the per-head softmax of ts_score's logits, summed
// over each list's heads, and the first digit of the top-k's radix histogram on the way. CPU twin:
// the vote in cpu/policy/TokenSelect.score. Launch wrapper: io.longsieve.cuda.kernels.SelectKernels.votes. A
// file of its own because it is a different kind of kernel from the scoring: no keys, all latency
// (one pass over 16 MB of logits that are still in L2).
#include "../common/common.cuh"
#include "../common/step_sizes.cuh"
#include "ts_topk.cuh"  // tk_key, TK_BINS, tk_hist_add: ts_votes builds the top-k's first histogram

// Soft vote: votes (lists, cands) f32; list 0 sums all heads (heads=layer), list g the heads that
// attend with KV head g, h / group = g (heads=kvhead; also under gqaMod, which only changes the key
// a head scores against), in increasing head order as the CPU does:
// votes[g][c] = sum_h exp(logit[h][c] - M_h) / L_h, (M_h, L_h) merged from the splits' partMl.
// hist (lists, histStride) u32, or null: hist[g][key >> 21] += the votes of list g with that top
// digit (tk_key, ts_topk.cuh): the first digit of ts_topk_lists' radix select, built here because this
// kernel touches every vote anyway (per block in shared memory, then one global atomic per non-zero
// bin). Grid-stride over candidates; heads <= 256, blockDim 256.
// Latency: a thread's first candidate's logits of the first TSV_PRE heads (heads=layer) are loaded
// before the block merges the split statistics, so that merge's L2 round trip and the logits' own
// round trip overlap instead of following each other (the sum is still in head order); the hit
// flag is only tested after them, so its load overlaps too.
// Issue rate: with one candidate per thread the kernel is all loads, then all arithmetic, and the
// arithmetic was its larger half (libm's expf is ~10 instructions, ~27 per (head, candidate) with
// the addressing and the per-head guards). A head's share is now tsv_share: a subtraction, a
// multiplication, the hardware 2^x and an fma (6 with the load and the statistics' one 8-byte
// shared load); the split merge uses the same 2^x, once per split. Accuracy: (x - M) is rounded as
// before; rounding t = (x - M) log2 e adds a relative error of 2^t of |t| 2^-24 ln 2 (4e-6 at
// |t| = 100), ex2.approx ~2^-22: far inside TsScoreParityTest's 1e-4 and TokenSelectParityTest's
// near-tie 1e-3.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define TSV_PRE 24  // in 64 registers (4 blocks per SM) without spills before sm_90
#else
#define TSV_PRE 32
#endif
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

extern "C" __global__ void __launch_bounds__(256, 4) ts_votes(float* __restrict__ votes, unsigned* __restrict__ hist,
                                    const float* __restrict__ logits, const float* __restrict__ partMl,
                                    const int* __restrict__ hit, int histStride, int heads, int nKv, int cands,
                                    int splits, int perKv, int gqaMod, const int* __restrict__ step) {
  // the hit flag's load goes out with the logits' and the statistics' (one round trip, not two; on a
  // hit they are read but not used: the host sizes every buffer whatever the device-side flag says)
  const int isHit = *hit;
  cands = step_size(step, STEP_CANDS, cands);
  __shared__ float2 sSt[256];  // (M_h, 1 / L_h)
  __shared__ unsigned sHist[TK_BINS];
  const int cFirst = blockIdx.x * blockDim.x + threadIdx.x;
  const bool preOn = !perKv && cFirst < cands;
  const float* lp = logits + (preOn ? cFirst : 0);
  float pre[TSV_PRE];  // logits[h][cFirst] of heads h < TSV_PRE, heads=layer only
#pragma unroll
  for (int h = 0; h < TSV_PRE; h++) pre[h] = preOn && h < heads ? __ldg(lp + (size_t)h * cands) : 0.f;
  // 8 lanes per head merge its splits: a max pass and the head's max over its 8 lanes, then a sum
  // pass against that max (one 2^x per split, none to combine the lanes), over independent loads,
  // so every block has the statistics after one L2 round trip (the sum pass's are L1 hits)
  const int sub = threadIdx.x & 7, per = blockDim.x >> 3;
  for (int h0 = 0; h0 < heads; h0 += per) {
    const int h = h0 + (threadIdx.x >> 3);
    const float* pm = partMl + (size_t)(h < heads ? h : 0) * splits * 2;
    float mx = -INFINITY;
#pragma unroll 4
    for (int s = sub; s < splits; s += 8) mx = fmaxf(mx, __ldg(pm + 2 * s));
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));  // all lanes take part
    float sum = 0.f;
    if (mx != -INFINITY) {
#pragma unroll 4
      for (int s = sub; s < splits; s += 8) {
        const float ms = __ldg(pm + 2 * s), ls = __ldg(pm + 2 * s + 1);  // ms: an L1 hit since the max pass
        if (ms != -INFINITY) sum = fmaf(ls, tsv_exp2((ms - mx) * TSV_LOG2E), sum);
      }
    }
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (sub == 0 && h < heads) sSt[h] = make_float2(mx, 1.f / sum);
  }
  if (isHit) return;  // block-uniform, before any write
  // heads [heads, TSV_PRE) add exactly 0 (their pre is 0: 2^0 * 0), so the unrolled loop below
  // needs no per-head guard
  if (threadIdx.x >= heads && threadIdx.x < TSV_PRE) sSt[threadIdx.x] = make_float2(0.f, 0.f);
  if (hist)
    for (int i = threadIdx.x; i < TK_BINS; i += blockDim.x) sHist[i] = 0u;
  __syncthreads();
  const int group = heads / nKv, rows = perKv ? nKv : 1;
  // one list at a time (the shared histogram is one list's); each vote's sum is in the same order
  for (int g = 0; g < rows; g++) {
    for (int c0 = blockIdx.x * blockDim.x; c0 < cands; c0 += gridDim.x * blockDim.x) {  // block-uniform
      const int c = c0 + threadIdx.x;
      float v = 0.f;
      if (c < cands) {
        const float* lc = logits + c;  // head h's logit of c: lc[h * cands]
        if (!perKv && c == cFirst) {
#pragma unroll
          for (int h = 0; h < TSV_PRE; h++) v = tsv_share(v, pre[h], sSt[h]);
#pragma unroll 8
          for (int h = TSV_PRE; h < heads; h++) v = tsv_share(v, __ldg(lc + (size_t)h * cands), sSt[h]);
        } else if (!perKv) {
#pragma unroll 8
          for (int h = 0; h < heads; h++) v = tsv_share(v, __ldg(lc + (size_t)h * cands), sSt[h]);
        } else {
#pragma unroll 8
          for (int j = 0; j < group; j++) {
            int h = g * group + j;  // the heads that attend with KV head g, whatever gqaMod scored them with
            v = tsv_share(v, __ldg(lc + (size_t)h * cands), sSt[h]);
          }
        }
        votes[(size_t)g * cands + c] = v;
      }
      if (hist) tk_hist_add(sHist, c < cands, tk_key(v) >> 21);  // whole warps: c0 is block-uniform
    }
    if (hist) {
      __syncthreads();
      unsigned* gh = hist + (size_t)g * histStride;
      for (int i = threadIdx.x; i < TK_BINS; i += blockDim.x) {
        unsigned n = sHist[i];
        if (n != 0u) {
          atomicAdd(&gh[i], n);
          sHist[i] = 0u;  // for the next list
        }
      }
      __syncthreads();
    }
  }
}
