// TokenSelect's top-k over the soft votes and the attended lists in ONE launch (issue 5 §4): a grid
// of (G, lists) blocks of TK_THREADS threads, G blocks per list cooperating through a software grid
// barrier. CPU twins: attention/TopK.select (the k largest, ties to the lower index, ascending
// output; k >= n: every index, the last repeated) and TokenSelect.buildLists (sinks ++ top ++ local).
// Launch wrapper: io.longsieve.cuda.SelectKernels.topKLists; the Java model of this algorithm is
// SelectKernelsHostTest.kernelModel (keep the two in step).
//
// Why this shape: at 128K candidates the work is tiny (512 KB of votes) and the time is latency:
// every grid barrier and every L2 round trip counts. So the kernel crosses the grid as few times as
// it can: with the first digit's histogram from ts_votes (`prebuilt`) ONE barrier when that digit's
// bin holds <= TK_CAP keys (peaked votes), two when it takes a second digit (flat votes), three on
// heavy ties; one more without `prebuilt` (max-pooled votes).
// The dependent chain of the usual path (prebuilt, one barrier, a block's slice one tile as at 128K
// with 32 blocks): ONE round trip for the hit flag, the histogram and the block's tile of votes
// together (the tile stays in registers for every later pass over it), the candidate slots' atomic,
// the barrier (fence, arrival atomic, polls; the last block to arrive does not poll), ONE round trip
// for the counts and all candidates together (TK_LD = TK_CAP / TK_THREADS loads per thread in
// flight); the rest is shared memory. The candidates' scan per tile also carries the greater count,
// so no block sum follows it.
// Radix select on the unsigned key of TopK.sortable (tk_key), digits of 11, 11 and 10 bits. Block b
// of a list owns the contiguous slice [b*S, b*S + S) of the row's virtual indices (S a multiple of
// TK_E). The state (shift, prefix, rem) says: keys with key >> shift > prefix are selected, and the
// `rem` lowest-index keys with key >> shift == prefix (the bin).
//  1. Global digits: per digit, every block histograms its slice's keys in the bin into the list's
//     global histogram for that digit (the first one may come from ts_votes); grid barrier; every
//     block reads the same histogram and resolves the same digit. Stop when the bin is taken whole,
//     all 32 bits are resolved, or the bin holds m <= TK_CAP keys: all decided identically everywhere.
//  2. Each block counts its keys above and in the bin and publishes both; if the bin still needs
//     resolving (m <= TK_CAP), it also appends its keys in the bin to the list's candidate buffer
//     (in arbitrary block order: each entry carries its block in the top 11 bits, which the prefix
//     makes redundant, and the key's low `shift` bits). Grid barrier.
//  3. Refinement: every block, redundantly and identically (the result depends on the candidates as
//     a multiset), radix-selects the remaining digits among the m candidates in shared memory,
//     stopping early when a bin is taken whole.
//  4. A block's output base is the number of selected keys before its slice: the counts of the
//     blocks before it (refined by their candidates). A block scan per tile orders the picks within
//     the block: the output is ascending.
//
// PERSISTENT-KERNEL ASSUMPTION: the barrier spins, so all G * lists blocks must be resident at once.
// The host keeps G * lists <= SM count (a plain launch; nothing else runs on the stream), and with
// G == 1 no barrier waits at all.
#include "common.cuh"
#include "ts_topk.cuh"

#define TK_THREADS 256  // SelectKernels.TOPK_THREADS
#define TK_E 16         // consecutive values per thread per tile (four float4 loads)
#define TK_CAP 8192     // candidates a block refines in shared memory (32 KB): larger bins take a global digit
#define TK_U 4          // candidates per thread and step of the refinement
#define TK_LD (TK_CAP / TK_THREADS)  // candidates per thread while loading them into shared memory: all in flight

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

// top (lists, count) int = sinks + ascending indices of the count largest of each row of vals
// (lists, n) f32, ties to the lower index (count >= n: every index, then the last repeated), and
// lists (lists, sinks + count + local) int = [0, sinks) ++ top ++ [end - local, end). On a Selection
// Cache hit (*hit) top already holds the cached top-k: it is only copied into the lists. count <= 0:
// lists only, vals is not read. ws (lists, TK_WS) u32 as in ts_topk.cuh; prebuilt: its first
// histograms already count each row's keys (ts_votes; only with 0 < count < n). cand (lists, n) u32
// scratch. Grid (G <= TK_MAXG, lists), all resident; exactly TK_THREADS threads (a compile-time count,
// so that the fixed-length loops unroll and put their loads in flight together; SelectKernelsHostTest
// models the arithmetic for any power of two).
extern "C" __global__ void __launch_bounds__(TK_THREADS, 1)  // one block per SM is all it needs: no spills
    ts_topk_lists(int* __restrict__ top, int* __restrict__ lists, const float* __restrict__ vals,
                  const int* __restrict__ hit, unsigned* __restrict__ ws, unsigned* __restrict__ cand, int n,
                  int count, int sinks, int local, int end, int prebuilt) {
  __shared__ unsigned hist[TK_BINS];
  __shared__ unsigned sKey[TK_CAP];
  __shared__ int4 sumTmp[32];
  __shared__ int scanTmp[32];
  __shared__ int sPick[3];
  __shared__ unsigned sSlot;
  constexpr int nt = TK_THREADS;
  const int t = threadIdx.x, b = blockIdx.x, g = gridDim.x, list = blockIdx.y;
  const int listLen = sinks + max(count, 0) + local;
  int* row = lists + (size_t)list * listLen;
  unsigned* lw = ws + (size_t)list * TK_WS;  // this list's workspace (ts_topk.cuh)
  // virtual index j = index + off, so that p = vals row - off is 16-byte aligned for float4 loads
  const float* v = vals + (size_t)list * n;
  const int off = (int)((reinterpret_cast<size_t>(v) >> 2) & 3);
  const float* p = v - off;
  const int hi = n + off, tile = TK_E * nt;
  const int slice = ((hi + g - 1) / g + TK_E - 1) / TK_E * TK_E;
  const int s0 = b * slice, s1 = min(hi, s0 + slice);  // may be empty: the block still meets the barriers
  const int isHit = *hit;
  // a selection: the prebuilt histogram's load and the block's first tile of votes go out with the
  // hit flag's load (one round trip, not three; on a hit they are simply not used; vals is valid
  // whenever count > 0)
  unsigned key0[TK_E], ok0 = 0u;
  if (count > 0 && count < n) {
    if (prebuilt) tk_hist_load(hist, lw);
    ok0 = tk_load(p, s0 + TK_E * t, off, s1, key0);  // s0 >= s1: no valid key, nothing read
  }
  for (int i = b * nt + t; i < sinks; i += g * nt) row[i] = i;
  for (int i = b * nt + t; i < local; i += g * nt) row[sinks + count + i] = end - local + i;
  // the early exits below are grid-uniform: no block waits at a barrier another skipped
  if (count <= 0) return;
  int* out = top + (size_t)list * count;
  if (isHit) {
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

  unsigned* cbuf = cand + (size_t)list * n;

  // ---- 1. global digits until the bin is taken whole, fully resolved or small enough to refine
  unsigned prefix = 0u;
  int rem = count, shift = 21, m = n, pass = 0;  // shift: the last digit's (not read before the first)
  bool whole = false;
  for (;; pass++) {
    const int sh = tk_shift(pass);
    const unsigned mask = tk_mask(pass);
    unsigned* gh = lw + pass * TK_BINS;
    if (pass > 0 || !prebuilt) {
      for (int i = t; i < TK_BINS; i += nt) hist[i] = 0u;
      __syncthreads();
      for (int j0 = s0; j0 < s1; j0 += tile) {  // block-uniform trip count: tk_hist_add's warp votes are safe
        unsigned key[TK_E];
        const unsigned ok = tk_tile(p, j0, s0, off, s1, key0, ok0, key);
#pragma unroll
        for (int e = 0; e < TK_E; e++)  // pass 0 takes every key; later ones shift by 21 or 10
          tk_hist_add(hist, ((ok >> e) & 1u) && (pass == 0 || (key[e] >> shift) == prefix), (key[e] >> sh) & mask);
      }
      __syncthreads();
      for (int i = t; i < TK_BINS; i += nt) {
        unsigned c = hist[i];
        if (c != 0u) atomicAdd(&gh[i], c);
      }
      tk_grid_sync(lw + TK_BAR, g);
      tk_hist_load(hist, gh);
    }  // else: loaded at the start
    __syncthreads();
    tk_resolve(hist, rem, scanTmp, sPick);
    prefix = pass == 0 ? (unsigned)sPick[0] : (prefix << (pass == 2 ? 10 : 11)) | (unsigned)sPick[0];
    rem = sPick[1];
    m = min(sPick[2], n);
    whole = sPick[2] == rem;
    shift = sh;
    if (whole || pass == 2 || m <= TK_CAP) break;  // grid-uniform: the same histogram everywhere
  }
  const bool refine = !whole && shift > 0;  // then m <= TK_CAP
  const unsigned low = (1u << shift) - 1u;   // only used when refine (shift 21 or 10)

  // ---- 2. this block's keys above and in the bin; with refine its keys in the bin as candidates
  // Without refine each thread counts and one block sum follows; with refine the candidates' block
  // scan per tile also carries the greater count (equal in the low, greater in the high 16 bits: a
  // tile holds <= 16 * 1024 of each), so its totals are the block's counts and no sum follows.
  int gtMine = 0, eqMine = 0, gtScan = 0, eqScan = 0;
  for (int j0 = s0; j0 < s1; j0 += tile) {  // block-uniform
    unsigned key[TK_E];
    const unsigned ok = tk_tile(p, j0, s0, off, s1, key0, ok0, key);
    unsigned ebits = 0u;
    int gt = 0;
#pragma unroll
    for (int e = 0; e < TK_E; e++) {
      const bool in = (ok >> e) & 1u;
      const unsigned s = key[e] >> shift;  // shift is 21, 10 or 0
      gt += in && s > prefix ? 1 : 0;
      ebits |= (in && s == prefix ? 1u : 0u) << e;
    }
    if (!refine) {  // block-uniform
      gtMine += gt;
      eqMine += __popc(ebits);
      continue;
    }
    int tot;
    const int ex = tk_block_excl(__popc(ebits) | (gt << 16), scanTmp, &tot) & 0xFFFF;
    gtScan += tot >> 16;
    tot &= 0xFFFF;
    eqScan += tot;
    if (tot == 0) continue;  // block-uniform
    if (t == 0) sSlot = atomicAdd(lw + TK_CNT, (unsigned)tot);  // the next write of sSlot is past two barriers
    __syncthreads();
    unsigned at = sSlot + (unsigned)ex;
#pragma unroll
    for (int e = 0; e < TK_E; e++) {
      if ((ebits >> e) & 1u) {
        if (at < (unsigned)n) cbuf[at] = ((unsigned)b << 21) | (key[e] & low);
        at++;
      }
    }
  }
  int gtBlock = gtScan, eqBlock = eqScan;
  if (!refine) {  // block-uniform
    const int4 own = tk_block_sum4(make_int4(gtMine, eqMine, 0, 0), sumTmp);
    gtBlock = own.x;
    eqBlock = own.y;
  }
  if (t == 0) {
    lw[TK_GT + b] = (unsigned)gtBlock;
    lw[TK_EQ + b] = (unsigned)eqBlock;
  }
  tk_grid_sync(lw + TK_BAR, g);
  int4 c4 = make_int4(0, 0, 0, 0);  // greater, equal in the blocks before this one; greater, equal of its own
  for (int i = t; i < b; i += nt) {  // loaded together with the candidates below
    c4.x += (int)__ldcg(lw + TK_GT + i);
    c4.y += refine ? 0 : (int)__ldcg(lw + TK_EQ + i);
  }
  // every block has read the histograms and taken its candidate slots: zero them for the next call
  for (int i = b * nt + t; i < 3 * TK_BINS; i += g * nt) lw[i] = 0u;
  if (b == 0 && t == 0) lw[TK_CNT] = 0u;

  // ---- 3. refinement among the candidates (key = prefix << shift | low bits), every block alike
  if (refine) {
    for (int i0 = 0; i0 < m; i0 += TK_LD * nt) {  // all loads of a step in flight, then the stores
      unsigned x[TK_LD];
#pragma unroll
      for (int u = 0; u < TK_LD; u++) {
        const int i = i0 + u * nt + t;
        x[u] = i < m ? __ldcg(cbuf + i) : 0u;
      }
#pragma unroll
      for (int u = 0; u < TK_LD; u++) {
        const int i = i0 + u * nt + t;
        if (i < m) sKey[i] = x[u];
      }
    }
    const unsigned base = prefix << shift;  // the bin's keys: base | low bits
    unsigned fPrefix = prefix;
    int fShift = shift;
    for (int fPass = pass + 1; fPass < 3; fPass++) {
      const int sh = tk_shift(fPass);
      const unsigned mask = tk_mask(fPass);
      for (int i = t; i < TK_BINS; i += nt) hist[i] = 0u;
      __syncthreads();  // also: sKey is complete
      for (int i0 = 0; i0 < m; i0 += TK_U * nt) {  // block-uniform trip count
#pragma unroll
        for (int u = 0; u < TK_U; u++) {
          const int i = i0 + u * nt + t;
          const unsigned k = i < m ? base | (sKey[i] & low) : 0u;
          // fShift (the previous digit's) is 21 or 10 here: never a shift by 32
          tk_hist_add(hist, i < m && (k >> fShift) == fPrefix, (k >> sh) & mask);
        }
      }
      __syncthreads();
      tk_resolve(hist, rem, scanTmp, sPick);
      fPrefix = (fPrefix << (fPass == 2 ? 10 : 11)) | (unsigned)sPick[0];
      fShift = sh;
      const bool fWhole = sPick[2] == sPick[1];
      rem = sPick[1];
      if (fWhole) break;  // grid-uniform: the same candidates everywhere
    }
    for (int i0 = 0; i0 < m; i0 += TK_U * nt) {
#pragma unroll
      for (int u = 0; u < TK_U; u++) {
        const int i = i0 + u * nt + t;
        const unsigned c = i < m ? sKey[i] : 0xFFFFFFFFu;  // block field 2047: no block's
        const unsigned blk = c >> 21, s = (base | (c & low)) >> fShift;
        const int gt = s > fPrefix ? 1 : 0, eq = s == fPrefix ? 1 : 0;
        if (blk < (unsigned)b) {
          c4.x += gt;
          c4.y += eq;
        } else if (blk == (unsigned)b) {
          c4.z += gt;
          c4.w += eq;
        }
      }
    }
    prefix = fPrefix;
    shift = fShift;
  }
  const int4 s4 = tk_block_sum4(c4, sumTmp);
  int gSeen = s4.x, eSeen = s4.y;
  const int gtOwn = gtBlock + s4.z, eqOwn = refine ? s4.w : eqBlock;
  if (gtOwn == 0 && (eqOwn == 0 || eSeen >= rem)) return;  // no pick here; block-uniform

  // ---- 4. ordered write: pick at index j goes to (greater before j) + min(equal before j, rem)
  for (int j0 = s0; j0 < s1; j0 += tile) {  // block-uniform
    unsigned key[TK_E];
    const unsigned ok = tk_tile(p, j0, s0, off, s1, key0, ok0, key);
    unsigned gbits = 0u, ebits = 0u;
#pragma unroll
    for (int e = 0; e < TK_E; e++) {
      unsigned s = key[e] >> shift;  // shift is 21, 10 or 0
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
          if (pos < count) {  // always, unless the workspace was not zero on entry
            out[pos] = s;
            row[sinks + pos] = s;
          }
        }
        gB += isG ? 1 : 0;
        eB += isE ? 1 : 0;
      }
    }
    gSeen += tot & 0xFFFF;
    eSeen += tot >> 16;
  }
}
