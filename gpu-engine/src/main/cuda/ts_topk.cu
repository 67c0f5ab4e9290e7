// TokenSelect's top-k over the soft votes and the attended lists in ONE launch (issue 5 §4): a grid
// of (G, lists) blocks of TK_THREADS threads, G blocks per list cooperating through a software grid
// barrier. CPU twins: attention/TopK.select (the k largest, ties to the lower index, ascending
// output; k >= n: every index, the last repeated) and TokenSelect.buildLists (sinks ++ top ++ local).
// Launch wrapper: io.longsieve.cuda.SelectKernels.topKLists; the Java model of this algorithm is
// SelectKernelsHostTest.kernelModel (keep the two in step).
//
// Why G blocks: one block cannot pull a 128K row of votes (512 KB) from L2 fast enough, three times.
// Block b of a list owns the contiguous slice [b*S, b*S + S) of the row's virtual indices (S a
// multiple of TK_E) and keeps it hot in its L1 across the passes.
// Algorithm (exact, deterministic): radix select on the unsigned key of TopK.sortable with digits of
// 11, 11 and 10 bits. Per pass each block histograms its slice (only keys whose higher digits match
// the prefix) in shared memory and adds the non-zero bins into the list's global histogram for that
// pass; grid barrier; every block reads the same global histogram and resolves the same digit, so the
// early stop (the chosen bin taken whole) is decided identically everywhere. That leaves (shift,
// prefix, rem): keys with key >> shift > prefix are selected, and the `rem` lowest-index keys with
// key >> shift == prefix. Then each block counts its (greater, equal) keys into the workspace;
// grid barrier; a block's output base is the sum over the blocks before it (index order = block
// order), and a block scan per tile orders the picks within the block: the output is ascending.
//
// PERSISTENT-KERNEL ASSUMPTION: the barrier spins, so all G * lists blocks must be resident at once.
// The host keeps G * lists <= SM count (a plain launch; nothing else runs on the stream), and with
// G == 1 no barrier waits at all.
#include "common.cuh"

#define TK_THREADS 512
#define TK_BINS 2048
#define TK_E 16      // consecutive values per thread per tile (four float4 loads)
#define TK_MAXG 32   // blocks per list at most (SelectKernels.TOPK_MAX_BLOCKS)
// Workspace per list, u32: [0] barrier arrivals, [1] barrier generation, [32, 32 + 3 * TK_BINS) the
// histograms of passes 0..2, then (greater, equal) counts per block. Zero at allocation; every call
// leaves the arrivals and histograms zero again (SelectKernels.TOPK_WS).
#define TK_WS (32 + 3 * TK_BINS + 2 * TK_MAXG)

// Unsigned bits whose order is the float's total order (attention/TopK.sortable + 2^31).
__device__ __forceinline__ unsigned tk_key(float f) {
  unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

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

// Exclusive block scan in thread order (blockDim a multiple of 32, <= 1024); *total = the sum over
// the block. tmp: 32 ints of shared memory.
__device__ __forceinline__ int tk_block_excl(int x, int* tmp, int* total) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
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

// Grid barrier of the g blocks of one list (bar: arrivals, generation). The generation is read
// before arriving: it can only move once this block has arrived. The last arrival resets the
// arrivals for the next barrier (or call), then releases the others. The fences make the block's
// global writes and atomics visible before its arrival, and others' visible after the wait.
__device__ __forceinline__ void tk_grid_sync(unsigned* bar, int g) {
  __syncthreads();
  if (threadIdx.x == 0 && g > 1) {
    volatile unsigned* gen = bar + 1;
    unsigned seen = *gen;
    __threadfence();
    if (atomicAdd(bar, 1u) == (unsigned)g - 1u) {
      atomicExch(bar, 0u);
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (*gen == seen) __nanosleep(32);
    }
    __threadfence();
  }
  __syncthreads();
}

// top (lists, count) int = sinks + ascending indices of the count largest of each row of vals
// (lists, n) f32, ties to the lower index (count >= n: every index, then the last repeated), and
// lists (lists, sinks + count + local) int = [0, sinks) ++ top ++ [end - local, end). On a Selection
// Cache hit (*hit) top already holds the cached top-k: it is only copied into the lists. count <= 0:
// lists only, vals is not read. ws (lists, TK_WS) u32 as above. Grid (G <= TK_MAXG, lists), all
// resident; TK_THREADS threads (any power of two in [32, 1024] works).
extern "C" __global__ void __launch_bounds__(TK_THREADS)
    ts_topk_lists(int* __restrict__ top, int* __restrict__ lists, const float* __restrict__ vals,
                  const int* __restrict__ hit, unsigned* __restrict__ ws, int n, int count, int sinks, int local,
                  int end) {
  __shared__ unsigned hist[TK_BINS];
  __shared__ int scanTmp[32];
  __shared__ unsigned sPrefix;
  __shared__ int sRem, sDone, sBase[2];
  const int t = threadIdx.x, nt = blockDim.x, lane = t & 31, b = blockIdx.x, g = gridDim.x, list = blockIdx.y;
  const int listLen = sinks + max(count, 0) + local;
  int* row = lists + (size_t)list * listLen;
  for (int i = b * nt + t; i < sinks; i += g * nt) row[i] = i;
  for (int i = b * nt + t; i < local; i += g * nt) row[sinks + count + i] = end - local + i;
  // the early exits below are grid-uniform: no block waits at a barrier another skipped
  if (count <= 0) return;
  int* out = top + (size_t)list * count;
  if (*hit) {
    for (int i = b * nt + t; i < count; i += g * nt) row[sinks + i] = out[i];
    return;
  }
  if (count >= n) {  // TopK.select takes everything; TokenSelect pads with the last index
    for (int i = b * nt + t; i < count; i += g * nt) {
      int s = sinks + max(0, min(i, n - 1));
      out[i] = s;
      row[sinks + i] = s;
    }
    return;
  }

  // virtual index j = index + off, so that p = vals row - off is 16-byte aligned for float4 loads
  const float* v = vals + (size_t)list * n;
  const int off = (int)((reinterpret_cast<size_t>(v) >> 2) & 3);
  const float* p = v - off;
  const int hi = n + off, tile = TK_E * nt;
  const int slice = ((hi + g - 1) / g + TK_E - 1) / TK_E * TK_E;
  const int s0 = b * slice, s1 = min(hi, s0 + slice);  // may be empty: the block still meets the barriers
  unsigned* bar = ws + (size_t)list * TK_WS;
  unsigned* ghist = bar + 32;                  // (3, TK_BINS)
  unsigned* gcnt = ghist + 3 * TK_BINS;        // (2, TK_MAXG): greater, equal per block

  // ---- radix select: after pass `pass`, prefix = the chosen key's bits >> shift, rem = how many of
  // the keys with that prefix are still to take
  unsigned prefix = 0u;
  int rem = count, shift = 21;  // pass 0 does not read prefix nor shift
  for (int pass = 0; pass < 3; pass++) {
    const int sh = pass == 0 ? 21 : (pass == 1 ? 10 : 0);
    const unsigned mask = pass == 2 ? 0x3FFu : 0x7FFu;
    for (int i = t; i < TK_BINS; i += nt) hist[i] = 0u;
    __syncthreads();
    for (int j0 = s0; j0 < s1; j0 += tile) {  // block-uniform trip count: the warp votes below are safe
      unsigned key[TK_E];
      const unsigned ok = tk_load(p, j0 + TK_E * t, off, s1, key);
#pragma unroll
      for (int e = 0; e < TK_E; e++) {
        unsigned k = key[e];
        // shift (the previous pass's sh) is 21 or 10 here: never a shift by 32
        bool in = ((ok >> e) & 1u) && (pass == 0 || (k >> shift) == prefix);
        if (__ballot_sync(0xffffffffu, in) == 0u) continue;  // later passes: most warps have none
        unsigned digit = in ? (k >> sh) & mask : 0xFFFFFFFFu;
        unsigned peers = __match_any_sync(0xffffffffu, digit);  // one atomic per distinct digit: ties
        if (in && (__ffs(peers) - 1) == lane) atomicAdd(&hist[digit], (unsigned)__popc(peers));
      }
    }
    __syncthreads();
    unsigned* gh = ghist + pass * TK_BINS;
    for (int i = t; i < TK_BINS; i += nt) {
      unsigned c = hist[i];
      if (c != 0u) atomicAdd(&gh[i], c);
    }
    tk_grid_sync(bar, g);
    for (int i = t; i < TK_BINS; i += nt) hist[i] = __ldcg(gh + i);  // L2: another block's atomics
    __syncthreads();
    // thread t owns bins top, top-1, .., top-per+1 (descending); the one whose range holds the rem-th
    // largest finds the digit. Every block computes the same.
    const int per = TK_BINS / nt, topBin = TK_BINS - 1 - t * per;
    int mine = 0, all;
    for (int q = 0; q < per; q++) mine += (int)hist[topBin - q];
    int before = tk_block_excl(mine, scanTmp, &all);
    if (before < rem && rem <= before + mine) {  // exactly one thread: 1 <= rem <= keys counted
      int acc = before, digit = topBin - per + 1;
      for (int q = 0; q < per; q++) {
        int c = (int)hist[topBin - q];
        if (acc + c >= rem) {
          digit = topBin - q;
          break;
        }
        acc += c;
      }
      sPrefix = (prefix << (pass == 2 ? 10 : 11)) | (unsigned)digit;
      sRem = rem - acc;
      sDone = pass == 2 || (int)hist[digit] == rem - acc;  // the whole bin is taken: no finer digit needed
    }
    __syncthreads();
    prefix = sPrefix;
    rem = sRem;
    shift = sh;
    if (sDone) break;  // grid-uniform: the same histogram everywhere
  }

  // ---- this block's (greater, equal) counts, published for the blocks after it
  int gtMine = 0, eqMine = 0;
  for (int j0 = s0; j0 < s1; j0 += tile) {
    unsigned key[TK_E];
    const unsigned ok = tk_load(p, j0 + TK_E * t, off, s1, key);
#pragma unroll
    for (int e = 0; e < TK_E; e++) {
      unsigned s = key[e] >> shift;  // shift is 21, 10 or 0 after the radix passes
      bool in = (ok >> e) & 1u;
      gtMine += in && s > prefix ? 1 : 0;
      eqMine += in && s == prefix ? 1 : 0;
    }
  }
  int gtBlock, eqBlock;
  tk_block_excl(gtMine, scanTmp, &gtBlock);
  tk_block_excl(eqMine, scanTmp, &eqBlock);
  if (t == 0) {
    gcnt[b] = (unsigned)gtBlock;
    gcnt[TK_MAXG + b] = (unsigned)eqBlock;
  }
  tk_grid_sync(bar, g);
  // every block has read the histograms (before arriving): zero them for the next call
  for (int i = b * nt + t; i < 3 * TK_BINS; i += g * nt) ghist[i] = 0u;
  if (t < 32) {  // warp 0: the counts of the blocks before this one
    int gb = t < b ? (int)__ldcg(gcnt + t) : 0, eb = t < b ? (int)__ldcg(gcnt + TK_MAXG + t) : 0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      gb += __shfl_xor_sync(0xffffffffu, gb, o);
      eb += __shfl_xor_sync(0xffffffffu, eb, o);
    }
    if (t == 0) {
      sBase[0] = gb;
      sBase[1] = eb;
    }
  }
  __syncthreads();
  int gSeen = sBase[0], eSeen = sBase[1];
  if (gtBlock == 0 && (eqBlock == 0 || eSeen >= rem)) return;  // no pick here; block-uniform

  // ---- ordered write: pick at index j goes to (greater before j) + min(equal before j, rem)
  for (int j0 = s0; j0 < s1; j0 += tile) {  // block-uniform
    unsigned key[TK_E];
    const unsigned ok = tk_load(p, j0 + TK_E * t, off, s1, key);
    unsigned gbits = 0u, ebits = 0u;
#pragma unroll
    for (int e = 0; e < TK_E; e++) {
      unsigned s = key[e] >> shift;
      bool in = (ok >> e) & 1u;
      gbits |= (in && s > prefix ? 1u : 0u) << e;
      ebits |= (in && s == prefix ? 1u : 0u) << e;
    }
    // greater in the low, equal in the high 16 bits: a tile holds <= 16 * 1024 of each, no carry
    int tot;
    int ex = tk_block_excl(__popc(gbits) | (__popc(ebits) << 16), scanTmp, &tot);
    int gB = gSeen + (ex & 0xFFFF), eB = eSeen + (ex >> 16);
    if ((gbits | ebits) != 0u) {
      for (int e = 0; e < TK_E; e++) {
        bool isG = (gbits >> e) & 1u, isE = (ebits >> e) & 1u;
        if (isG || (isE && eB < rem)) {
          int pos = gB + min(eB, rem), s = sinks + (j0 + TK_E * t + e - off);
          out[pos] = s;
          row[sinks + pos] = s;
        }
        gB += isG ? 1 : 0;
        eB += isE ? 1 : 0;
      }
    }
    gSeen += tot & 0xFFFF;
    eSeen += tot >> 16;
  }
}
