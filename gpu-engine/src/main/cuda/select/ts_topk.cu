// TokenSelect's top-k over the soft votes and the attended lists in ONE launch (issue 5 §4): a grid
// of (G, lists) blocks of TK_THREADS threads, G blocks per list cooperating through a software grid
// barrier. CPU twins: cpu/policy/TopK.select (the k largest, ties to the lower index, ascending
// output; k >= n: every index, the last repeated) and TokenSelect.buildLists (sinks ++ top ++ local).
// Launch wrapper: io.longsieve.cuda.kernels.SelectKernels.topKLists; the Java model of this algorithm is
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
//
// Tile loads, block scan and sum, the grid barrier and the digit resolution: ts_topk_block.cuh.
#include "../common/common.cuh"
#include "ts_topk.cuh"
#include "ts_topk_block.cuh"  // TK_THREADS, TK_E and the block helpers
#include "../common/step_sizes.cuh"

#define TK_CAP 8192     // candidates a block refines in shared memory (32 KB): larger bins take a global digit
#define TK_U 4          // candidates per thread and step of the refinement
#define TK_LD (TK_CAP / TK_THREADS)  // candidates per thread while loading them into shared memory: all in flight

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
                  int count, int sinks, int local, int end, int prebuilt, const int* __restrict__ step) {
  n = step_size(step, STEP_N, n);
  end = step_size(step, STEP_END, end);
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
