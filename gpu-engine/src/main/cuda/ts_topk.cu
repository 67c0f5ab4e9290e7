// TokenSelect's top-k over the soft votes and the attended lists in ONE launch (issue 5 §4), one
// block of TK_THREADS threads per list. CPU twins: attention/TopK.select (the k largest, ties to the
// lower index, ascending output; k >= n: every index, the last repeated) and TokenSelect.buildLists
// (sinks ++ top ++ local). Launch wrapper: io.longsieve.cuda.SelectKernels.topKLists; the Java model
// of this algorithm is SelectKernelsHostTest.kernelModel (keep the two in step).
//
// Algorithm (exact, deterministic): radix select on the unsigned key of TopK.sortable with digits of
// 11, 11 and 10 bits (shared 2048-bin histogram, the votes re-read from L2 each pass, only keys whose
// higher digits match the prefix counted; pass 1 also copies the keys of pass 0's bin to shared memory
// when at most TK_CAP, and pass 2 then reads them there), stopping early when the chosen bin is taken whole; that
// leaves (shift, prefix, rem): every key with key >> shift > prefix is selected, and the `rem`
// lowest-index keys with key >> shift == prefix (when shift > 0, rem is that whole bin). One ordered
// pass then writes the picks: the block walks tiles of 16 * TK_THREADS values in index order, a
// block scan of the per-thread (greater, equal) counts gives each pick its output position, so the
// output is ascending by construction.
#include "common.cuh"

#define TK_THREADS 1024
#define TK_BINS 2048
#define TK_U 4  // float4 loads per thread in flight per step (16 values)
#define TK_CAP 8192  // keys of pass 0's chosen bin kept in shared memory for pass 2 (32 KB)

// Unsigned bits whose order is the float's total order (attention/TopK.sortable + 2^31).
__device__ __forceinline__ unsigned tk_key(float f) {
  unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Keys of virtual indices j .. j+3 of p, valid for lo <= index < hi; returns the valid ones as bits
// 0..3 (invalid keys are 0 and must be ignored). p is 16-byte aligned, so a whole in-range quad is
// one float4 load; a partial quad (row start or end) reads only its valid elements.
__device__ __forceinline__ unsigned tk_load4(const float* __restrict__ p, int j, int lo, int hi, unsigned* key) {
  if (j >= lo && j + 4 <= hi) {
    float4 f = *reinterpret_cast<const float4*>(p + j);
    key[0] = tk_key(f.x);
    key[1] = tk_key(f.y);
    key[2] = tk_key(f.z);
    key[3] = tk_key(f.w);
    return 15u;
  }
  unsigned ok = 0u;
#pragma unroll
  for (int e = 0; e < 4; e++) {
    bool in = j + e >= lo && j + e < hi;
    key[e] = in ? tk_key(p[j + e]) : 0u;
    ok |= (in ? 1u : 0u) << e;
  }
  return ok;
}

// Inclusive warp scan (all 32 lanes).
__device__ __forceinline__ unsigned tk_warp_incl(unsigned x, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    unsigned y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  return x;
}

// Exclusive block scan in thread order (blockDim a multiple of 32); tmp: 32 ints of shared memory.
__device__ __forceinline__ int tk_block_excl(int x, int* tmp) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int incl = (int)tk_warp_incl((unsigned)x, lane);
  __syncthreads();  // tmp's previous readers are done
  if (lane == 31) tmp[warp] = incl;
  __syncthreads();
  int before = 0;
  for (int w = 0; w < warp; w++) before += tmp[w];
  return before + incl - x;
}

// top (lists, count) int = sinks + ascending indices of the count largest of each row of vals
// (lists, n) f32, ties to the lower index (count >= n: every index, then the last repeated), and
// lists (lists, sinks + count + local) int = [0, sinks) ++ top ++ [end - local, end). On a Selection
// Cache hit (*hit) top already holds the cached top-k: it is only copied into the lists. count <= 0:
// lists only, vals is not read. Grid (lists), TK_THREADS threads (any power of two in [32, 1024] works).
extern "C" __global__ void __launch_bounds__(TK_THREADS, 1)
    ts_topk_lists(int* __restrict__ top, int* __restrict__ lists, const float* __restrict__ vals,
                  const int* __restrict__ hit, int n, int count, int sinks, int local, int end) {
  __shared__ unsigned hist[TK_BINS];
  __shared__ int scanTmp[32];
  // [0] greater, [1] equal counts of the ordered write
  __shared__ unsigned sW[2][32];       // per warp: its lane 31's inclusive packed counts (a byte per sub-tile)
  __shared__ unsigned sPre[2][32][4];  // per warp and sub-tile: counts of the warps before it
  __shared__ unsigned sBase[2][5];     // per sub-tile: counts of the sub-tiles before it; [4]: the tile's
  __shared__ unsigned cand[TK_CAP];    // pass 1 gathers the keys of pass 0's bin here when they fit
  __shared__ unsigned sPrefix;
  __shared__ int sRem, sDone, sGather, sCount;
  const int t = threadIdx.x, nt = blockDim.x, lane = t & 31, warp = t >> 5, nw = nt >> 5, list = blockIdx.x;
  const int listLen = sinks + max(count, 0) + local;
  int* row = lists + (size_t)list * listLen;
  for (int i = t; i < sinks; i += nt) row[i] = i;
  for (int i = t; i < local; i += nt) row[sinks + count + i] = end - local + i;
  if (count <= 0) return;
  int* out = top + (size_t)list * count;
  if (*hit) {  // block-uniform
    for (int i = t; i < count; i += nt) row[sinks + i] = out[i];
    return;
  }
  if (count >= n) {  // TopK.select takes everything; TokenSelect pads with the last index
    for (int i = t; i < count; i += nt) {
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
  const int hi = n + off, quad = 4 * nt, step = TK_U * quad;

  // ---- radix select: after pass `pass`, prefix = the chosen key's bits >> shift, rem = how many of
  // the keys with that prefix are still to take
  unsigned prefix = 0u;
  int rem = count, shift = 21;  // pass 0 does not read prefix nor shift
  bool gather = false;          // pass 1 copies the keys it counts into cand; pass 2 reads them there
  for (int pass = 0; pass < 3; pass++) {
    const int sh = pass == 0 ? 21 : (pass == 1 ? 10 : 0);
    const unsigned mask = pass == 2 ? 0x3FFu : 0x7FFu;
    for (int b = t; b < TK_BINS; b += nt) hist[b] = 0u;
    if (t == 0 && pass == 1) sCount = 0;
    __syncthreads();
    if (pass == 2 && gather) {  // block-uniform: the sCount keys of pass 0's bin, from shared memory
      const int c0 = sCount;
      for (int i0 = 0; i0 < c0; i0 += nt) {  // block-uniform trip count
        int i = i0 + t;
        unsigned k = i < c0 ? cand[i] : 0u;
        bool in = i < c0 && (k >> shift) == prefix;
        if (__ballot_sync(0xffffffffu, in) == 0u) continue;
        unsigned digit = in ? (k >> sh) & mask : 0xFFFFFFFFu;
        unsigned peers = __match_any_sync(0xffffffffu, digit);
        if (in && (__ffs(peers) - 1) == lane) atomicAdd(&hist[digit], (unsigned)__popc(peers));
      }
    } else {
      for (int jb = 0; jb < hi; jb += step) {  // block-uniform trip count: the warp votes below are safe
        unsigned key[TK_U][4], ok[TK_U];
#pragma unroll
        for (int u = 0; u < TK_U; u++) ok[u] = tk_load4(p, jb + u * quad + 4 * t, off, hi, key[u]);
#pragma unroll
        for (int u = 0; u < TK_U; u++) {
#pragma unroll
          for (int e = 0; e < 4; e++) {
            unsigned k = key[u][e];
            // shift (the previous pass's sh) is 21 or 10 here: never a shift by 32
            bool in = ((ok[u] >> e) & 1u) && (pass == 0 || (k >> shift) == prefix);
            unsigned bal = __ballot_sync(0xffffffffu, in);
            if (bal == 0u) continue;  // later passes: most warps have none
            if (pass == 1 && gather) {  // warp-uniform; sCount ends at pass 0's bin count <= TK_CAP
              int leader = __ffs(bal) - 1, base = 0;
              if (lane == leader) base = atomicAdd(&sCount, __popc(bal));
              base = __shfl_sync(0xffffffffu, base, leader) + __popc(bal & ((1u << lane) - 1u));
              if (in && base < TK_CAP) cand[base] = k;
            }
            unsigned digit = in ? (k >> sh) & mask : 0xFFFFFFFFu;
            unsigned peers = __match_any_sync(0xffffffffu, digit);  // one atomic per distinct digit: ties
            if (in && (__ffs(peers) - 1) == lane) atomicAdd(&hist[digit], (unsigned)__popc(peers));
          }
        }
      }
    }
    __syncthreads();
    // thread t owns bins top, top-1, .., top-per+1 (descending); the one whose range holds the rem-th
    // largest finds the digit
    const int per = TK_BINS / nt, topBin = TK_BINS - 1 - t * per;
    int mine = 0;
    for (int q = 0; q < per; q++) mine += (int)hist[topBin - q];
    int before = tk_block_excl(mine, scanTmp);
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
      if (pass == 0) sGather = (int)hist[digit] <= TK_CAP;
    }
    __syncthreads();
    prefix = sPrefix;
    rem = sRem;
    shift = sh;
    if (pass == 0) gather = sGather;
    if (sDone) break;  // block-uniform
  }

  // ---- ordered write. A tile is TK_U sub-tiles of `quad` values; in sub-tile u thread t holds
  // virtual indices [4t, 4t + 4) (coalesced float4s), so index order is (u, thread, element).
  // Counts are packed one byte per sub-tile (a warp's sub-tile holds <= 128 of each), greater in gw,
  // equal in ew; warp 0 turns the warp totals into exclusive 16-bit-safe prefixes.
  const int gtTotal = count - rem;
  int gtSeen = 0, eqSeen = 0;
  for (int j0 = 0; j0 < hi; j0 += step) {  // block-uniform
    unsigned key[TK_U][4], ok[TK_U];
#pragma unroll
    for (int u = 0; u < TK_U; u++) ok[u] = tk_load4(p, j0 + u * quad + 4 * t, off, hi, key[u]);
    unsigned gbits = 0u, ebits = 0u, gw = 0u, ew = 0u;
#pragma unroll
    for (int u = 0; u < TK_U; u++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        unsigned s = key[u][e] >> shift;  // shift is 21, 10 or 0 after the radix passes
        bool in = (ok[u] >> e) & 1u;
        gbits |= (in && s > prefix ? 1u : 0u) << (u * 4 + e);
        ebits |= (in && s == prefix ? 1u : 0u) << (u * 4 + e);
      }
      gw |= (unsigned)__popc((gbits >> (u * 4)) & 15u) << (8 * u);
      ew |= (unsigned)__popc((ebits >> (u * 4)) & 15u) << (8 * u);
    }
    unsigned gi = tk_warp_incl(gw, lane), ei = tk_warp_incl(ew, lane);  // bytes stay <= 128: no carries
    if (lane == 31) {
      sW[0][warp] = gi;
      sW[1][warp] = ei;
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
      for (int f = 0; f < 2; f++) {
        unsigned x = lane < nw ? sW[f][lane] : 0u;
        // bytes 0,1 and 2,3 as 16-bit fields: a sub-tile holds <= 4 * 1024 values, < 2^16
        unsigned lo = (x & 0xFFu) | (((x >> 8) & 0xFFu) << 16), hi2 = ((x >> 16) & 0xFFu) | ((x >> 24) << 16);
        unsigned loI = tk_warp_incl(lo, lane), hiI = tk_warp_incl(hi2, lane);
        unsigned loE = loI - lo, hiE = hiI - hi2;
        if (lane < nw) {
          sPre[f][lane][0] = loE & 0xFFFFu;
          sPre[f][lane][1] = loE >> 16;
          sPre[f][lane][2] = hiE & 0xFFFFu;
          sPre[f][lane][3] = hiE >> 16;
        }
        if (lane == 31) {  // loI, hiI of lane 31: the sub-tile totals
          unsigned t0 = loI & 0xFFFFu, t1 = loI >> 16, t2 = hiI & 0xFFFFu, t3 = hiI >> 16;
          sBase[f][0] = 0u;
          sBase[f][1] = t0;
          sBase[f][2] = t0 + t1;
          sBase[f][3] = t0 + t1 + t2;
          sBase[f][4] = t0 + t1 + t2 + t3;
        }
      }
    }
    __syncthreads();
    // most threads hold no pick (k << n): skip the position arithmetic
#pragma unroll
    for (int u = 0; u < TK_U; u++) {
      if ((((gbits | ebits) >> (u * 4)) & 15u) == 0u) continue;
      int gB = gtSeen + (int)(sBase[0][u] + sPre[0][warp][u] + ((gi >> (8 * u)) & 0xFFu) - ((gw >> (8 * u)) & 0xFFu));
      int eB = eqSeen + (int)(sBase[1][u] + sPre[1][warp][u] + ((ei >> (8 * u)) & 0xFFu) - ((ew >> (8 * u)) & 0xFFu));
#pragma unroll
      for (int e = 0; e < 4; e++) {
        bool isG = (gbits >> (u * 4 + e)) & 1u, isE = (ebits >> (u * 4 + e)) & 1u;
        if (isG || (isE && eB < rem)) {
          int pos = gB + min(eB, rem), s = sinks + (j0 + u * quad + 4 * t + e - off);
          out[pos] = s;
          row[sinks + pos] = s;
        }
        gB += isG ? 1 : 0;
        eB += isE ? 1 : 0;
      }
    }
    // no barrier needed here: sBase and sPre are rewritten only after the next tile's first barrier
    gtSeen += (int)sBase[0][4];
    eqSeen += (int)sBase[1][4];
    if (gtSeen == gtTotal && eqSeen >= rem) break;  // every pick written; block-uniform
  }
}
