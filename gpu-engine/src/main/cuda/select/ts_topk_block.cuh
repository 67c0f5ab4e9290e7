// The block-level pieces of ts_topk_lists (ts_topk.cu), written for its block shape (TK_THREADS
// threads, TK_E consecutive values per thread and tile): the tile loads of the votes, the block scan
// and sum, the software grid barrier of a list's blocks, and the radix select's histogram read and
// digit resolution. Apart from the kernel so that ts_topk.cu reads as the algorithm (its four steps)
// while each piece here, with its own contract, is checked on its own; SelectKernelsHostTest.kernelModel
// models their arithmetic in Java.
#pragma once
#include "../common/common.cuh"
#include "ts_topk.cuh"  // tk_key, TK_BINS

#define TK_THREADS 256  // SelectKernels.TOPK_THREADS
#define TK_E 16         // consecutive values per thread per tile (four float4 loads)

// Keys of virtual indices j .. j+TK_E-1 of p, valid for lo <= index < hi; returns the valid ones as
// bits (invalid keys are 0 and must be ignored). p is 16-byte aligned and j a multiple of 4, so a
// whole in-range quad is one float4 load; a partial quad reads only its valid elements.
__device__ __forceinline__ unsigned tk_load(const float* __restrict__ p, int j, int lo, int hi, unsigned* key) {
  unsigned ok = 0u;
#pragma unroll
  for (int q = 0; q < TK_E; q += 4) {
    int i = j + q;
    if (i >= lo && i + 4 <= hi) {
      float4 f = *reinterpret_cast<const float4*>(p + i);
      key[q] = tk_key(f.x);
      key[q + 1] = tk_key(f.y);
      key[q + 2] = tk_key(f.z);
      key[q + 3] = tk_key(f.w);
      ok |= 15u << q;
    } else {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        bool in = i + e >= lo && i + e < hi;
        key[q + e] = in ? tk_key(p[i + e]) : 0u;
        ok |= (in ? 1u : 0u) << (q + e);
      }
    }
  }
  return ok;
}

// Keys of the tile at j0 (tk_load's contract): the block's first tile (j0 == s0) was loaded at the
// start of the kernel together with the histogram, so the passes over it wait on no memory (at 128K
// votes and 32 blocks a block's slice is that one tile); block-uniform choice.
__device__ __forceinline__ unsigned tk_tile(const float* __restrict__ p, int j0, int s0, int lo, int hi,
                                            const unsigned* key0, unsigned ok0, unsigned* key) {
  if (j0 == s0) {
#pragma unroll
    for (int e = 0; e < TK_E; e++) key[e] = key0[e];
    return ok0;
  }
  return tk_load(p, j0 + TK_E * threadIdx.x, lo, hi, key);
}

// Exclusive block scan in thread order (TK_THREADS threads); *total = the sum over the block. tmp:
// 32 ints of shared memory.
__device__ __forceinline__ int tk_block_excl(int x, int* tmp, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = TK_THREADS / 32;
  int incl = x;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    int y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  __syncthreads();  // tmp's previous readers are done
  if (lane == 31) tmp[warp] = incl;
  __syncthreads();
  int before = 0, tot = 0;
  for (int w = 0; w < nw; w++) {
    int c = tmp[w];
    before += w < warp ? c : 0;
    tot += c;
  }
  *total = tot;
  return before + incl - x;
}

// Sum over the block of four ints; tmp: 32 int4 of shared memory.
__device__ __forceinline__ int4 tk_block_sum4(int4 x, int4* tmp) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = TK_THREADS / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    x.x += __shfl_xor_sync(0xffffffffu, x.x, o);
    x.y += __shfl_xor_sync(0xffffffffu, x.y, o);
    x.z += __shfl_xor_sync(0xffffffffu, x.z, o);
    x.w += __shfl_xor_sync(0xffffffffu, x.w, o);
  }
  __syncthreads();  // tmp's previous readers are done
  if (lane == 0) tmp[warp] = x;
  __syncthreads();
  int4 s = make_int4(0, 0, 0, 0);
  for (int w = 0; w < nw; w++) {
    int4 c = tmp[w];
    s.x += c.x;
    s.y += c.y;
    s.z += c.z;
    s.w += c.w;
  }
  return s;
}

// Grid barrier of the g blocks of one list on one word, never reset: block 0 adds 2^31 - (g - 1),
// the others 1, so the top bit flips exactly when the last block arrives (before that the sum of the
// arrivals is below 2^31) and the low 31 bits are zero again, ready for the next barrier or call. A
// block waits until the top bit differs from the one it saw when arriving; it cannot flip back before
// this block arrives at the next barrier. The fences publish the block's global writes and atomics
// before its arrival and order its later reads after the others' writes.
__device__ __forceinline__ void tk_grid_sync(unsigned* bar, int g) {
  __syncthreads();
  if (threadIdx.x == 0 && g > 1) {
    const unsigned add = blockIdx.x == 0 ? 0x80000000u - (unsigned)(g - 1) : 1u;
    __threadfence();
    const unsigned old = atomicAdd(bar, add);
    // the last block to arrive flips the top bit itself (old + add): it need not read the word back,
    // one L2 round trip less on the path of the block that everybody waited for
    if ((((old + add) ^ old) & 0x80000000u) == 0u) {
      const volatile unsigned* v = bar;
      while (((old ^ *v) & 0x80000000u) == 0u) {
      }
    }
    __threadfence();
  }
  __syncthreads();
}

// Every thread gets, in pick = (digit, left, size): the bin of hist (TK_BINS counts) holding the
// rem-th largest key counted (1 <= rem <= the keys counted), how many of that bin's keys are taken,
// and the bin's size (left == size: the bin is taken whole). Thread t owns the bins top, top-1, ..,
// top-per+1; the one whose range holds the rem-th largest finds the digit. An inconsistent histogram
// (no such thread) gives (0, 0, 0): wrong picks, but every later index stays in bounds.
__device__ __forceinline__ void tk_resolve(const unsigned* hist, int rem, int* scanTmp, int* pick) {
  const int t = threadIdx.x, per = TK_BINS / TK_THREADS, topBin = TK_BINS - 1 - t * per;
  if (t == 0) pick[0] = pick[1] = pick[2] = 0;  // the readers of the last pick passed a barrier since
  int mine = 0, all;
  // rotated by t / 4: the 32 lanes of a warp read 32 different banks (8 * (t & 3) + rotation)
#pragma unroll
  for (int q = 0; q < per; q++) mine += (int)hist[topBin - ((q + (t >> 2)) & (per - 1))];
  const int before = tk_block_excl(mine, scanTmp, &all);
  if (before < rem && rem <= before + mine) {  // exactly one thread
    int acc = before, digit = topBin - per + 1;
    for (int q = 0; q < per; q++) {
      int c = (int)hist[topBin - q];
      if (acc + c >= rem) {
        digit = topBin - q;
        break;
      }
      acc += c;
    }
    pick[0] = digit;
    pick[1] = rem - acc;
    pick[2] = (int)hist[digit];
  }
  __syncthreads();
}

// hist (shared, TK_BINS) = gh from L2 (other blocks' or ts_votes' atomics), a thread's loads all in
// flight before its stores.
__device__ __forceinline__ void tk_hist_load(unsigned* hist, const unsigned* gh) {
  constexpr int per = TK_BINS / TK_THREADS;
  unsigned x[per];
#pragma unroll
  for (int q = 0; q < per; q++) x[q] = __ldcg(gh + threadIdx.x + q * TK_THREADS);
#pragma unroll
  for (int q = 0; q < per; q++) hist[threadIdx.x + q * TK_THREADS] = x[q];
}

// Digit `pass` (0, 1, 2) of a key: its shift and mask.
__device__ __forceinline__ int tk_shift(int pass) { return pass == 0 ? 21 : (pass == 1 ? 10 : 0); }
__device__ __forceinline__ unsigned tk_mask(int pass) { return pass == 2 ? 0x3FFu : 0x7FFu; }
