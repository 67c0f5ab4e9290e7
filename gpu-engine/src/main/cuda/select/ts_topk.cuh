// What ts_votes (ts_votes.cu) and ts_topk_lists (ts_topk.cu) share: the sortable key of a vote and
// the layout of the top-k workspace, whose first TK_BINS words per list are the histogram of the
// keys' top 11 bits. ts_votes can build that histogram while it writes the votes (it touches every
// vote anyway), so the top-k starts at its second digit: one pass and one grid barrier less.
#pragma once

#define TK_BINS 2048  // 11-bit digits
#define TK_MAXG 64    // top-k blocks per list at most (SelectKernels.TOPK_MAX_BLOCKS); < 2^11 (candidate packing)
// Workspace per list, u32 (SelectKernels.TOPK_WS): [0, 3 * TK_BINS) the global histograms of digits
// 0, 1, 2 (digit 0 = key >> 21, the one ts_votes can build); TK_BAR the grid barrier word; TK_CNT the
// candidate counter; [TK_GT, +TK_MAXG) and [TK_EQ, +TK_MAXG) keys above and in the chosen bin per
// block. Zero at allocation; every call leaves the histograms and counter zero and the barrier word a
// multiple of 2^31 (tk_grid_sync).
#define TK_BAR (3 * TK_BINS)
#define TK_CNT (3 * TK_BINS + 1)
#define TK_GT (3 * TK_BINS + 32)
#define TK_EQ (TK_GT + TK_MAXG)
#define TK_WS (TK_EQ + TK_MAXG)

// Unsigned bits whose order is the float's total order (cpu/policy/TopK.sortable + 2^31).
__device__ __forceinline__ unsigned tk_key(float f) {
  unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// hist[digit] += 1 for every lane with `in`, one shared atomic per distinct digit of the warp (heavy
// ties would otherwise serialise 32 atomics on one address). Whole warp, converged.
__device__ __forceinline__ void tk_hist_add(unsigned* hist, bool in, unsigned digit) {
  if (__ballot_sync(0xffffffffu, in) == 0u) return;  // warp-uniform
  unsigned d = in ? digit : 0xFFFFFFFFu;
  unsigned peers = __match_any_sync(0xffffffffu, d);
  if (in && (__ffs(peers) - 1) == (int)(threadIdx.x & 31)) atomicAdd(&hist[digit], (unsigned)__popc(peers));
}
