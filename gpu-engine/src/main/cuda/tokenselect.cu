// TokenSelect on the GPU (issue 5 §1): fingerprint, device-side Selection Cache check, scoring of the
// pre-RoPE keys (bf16 or the policy's int4 copy) with fused softmax statistics, the soft vote,
// max-pool, radix top-k and the attended lists. CPU twin: attention/TokenSelect.java. Every kernel
// after the cache check reads the hit flag and returns at once on a hit (the cached top-k is used).
// Launch wrappers: io.longsieve.cuda.SelectKernels.
#include "common.cuh"

// cos, sin (positions, half) f32 of positions pos0 .. pos0 + positions - 1 (model/Rope's angles, as
// rope_cs). Grid (positions), any block size.
extern "C" __global__ void ts_rope_table(float* __restrict__ cosT, float* __restrict__ sinT,
                                         const float* __restrict__ invFreq, int pos0, int half) {
  int p = blockIdx.x;
  for (int t = threadIdx.x; t < half; t += blockDim.x) {
    float c, s;
    rope_cs(pos0 + p, invFreq[t], &c, &s);
    cosT[(size_t)p * half + t] = c;
    sinT[(size_t)p * half + t] = s;
  }
}

// qf (heads, d) f32 = mean over rows i < m of head h of qPre row i (rows of qStride f32, before
// RoPE) rotated with row i of the tables cosT, sinT (>= m, d / 2) f32 (positions window + i).
// Grid (heads, ceil(d / 64)), 256 threads = 32 columns x 8 row groups whose partial sums are added
// in a fixed order.
extern "C" __global__ void ts_fingerprint(float* __restrict__ qf, const float* __restrict__ qPre, int qStride, int m,
                                          int heads, int d, const float* __restrict__ cosT,
                                          const float* __restrict__ sinT) {
  __shared__ float pa[8][32], pb[8][32];
  int x = threadIdx.x & 31, y = threadIdx.x >> 5;
  int h = blockIdx.x, half = d / 2, t = blockIdx.y * 32 + x;
  float a = 0.f, b = 0.f;
  if (t < half) {
    for (int i = y; i < m; i += 8) {
      const float* src = qPre + (size_t)i * qStride + h * d;
      float c = cosT[(size_t)i * half + t], s = sinT[(size_t)i * half + t];
      float x1 = src[t], x2 = src[half + t];
      a += x1 * c - x2 * s;
      b += x2 * c + x1 * s;
    }
  }
  pa[y][x] = a;
  pb[y][x] = b;
  __syncthreads();
  if (y == 0 && t < half) {
    float sa = 0.f, sb = 0.f;
    for (int r = 0; r < 8; r++) {
      sa += pa[r][x];
      sb += pb[r][x];
    }
    float inv = 1.f / m;
    qf[h * d + t] = sa * inv;
    qf[h * d + half + t] = sb * inv;
  }
}

// Selection Cache decision, one block (a multiple of 32 threads): hit = possible && cosine(qf,
// cachedQf) >= threshold (the cosine in double as the CPU computes it, 0 for a zero vector). A hit
// counts in hits; on a miss with store set, qf becomes the cached fingerprint (the top-k kernel
// then overwrites the cached top-k). `possible` is the host's knowledge that the cached top-k has
// this call's count.
extern "C" __global__ void ts_cache_check(int* __restrict__ hit, unsigned long long* __restrict__ hits,
                                          float* __restrict__ cachedQf, const float* __restrict__ qf, int n,
                                          int possible, int store, double threshold) {
  __shared__ double red[3][32];
  __shared__ int decided;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (possible) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      double x = qf[i], y = cachedQf[i];
      ab += x * y;
      aa += x * x;
      bb += y * y;
    }
    for (int o = 16; o > 0; o >>= 1) {
      ab += __shfl_xor_sync(0xffffffffu, ab, o);
      aa += __shfl_xor_sync(0xffffffffu, aa, o);
      bb += __shfl_xor_sync(0xffffffffu, bb, o);
    }
    if (lane == 0) {
      red[0][warp] = ab;
      red[1][warp] = aa;
      red[2][warp] = bb;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      double sab = 0, saa = 0, sbb = 0;
      for (int w = 0; w < nw; w++) {
        sab += red[0][w];
        saa += red[1][w];
        sbb += red[2][w];
      }
      double cs = (saa == 0 || sbb == 0) ? 0.0 : fmax(-1.0, fmin(1.0, sab / sqrt(saa * sbb)));
      decided = cs >= threshold ? 1 : 0;
    }
  } else if (threadIdx.x == 0) {
    decided = 0;
  }
  __syncthreads();
  int h = decided;
  if (threadIdx.x == 0) {
    *hit = h;
    if (h) *hits += 1ull;
  }
  if (!h && store) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) cachedQf[i] = qf[i];
  }
}

// Scoring and the soft vote (ts_score_d*, ts_score_int4_d*, ts_votes): ts_score.cu.

// pooled (lists, len) = max_pool1d over each list of votes (lists, n) with kernel, stride 1, padding
// (kernel - 1) / 2 of -inf (torch; CPU TokenSelect.maxPool); len = n + 2 pad - kernel + 1. Grid (x, lists).
extern "C" __global__ void ts_maxpool(float* __restrict__ pooled, const float* __restrict__ votes,
                                      const int* __restrict__ hit, int n, int len, int kernel) {
  if (*hit) return;
  int pad = (kernel - 1) / 2;
  const float* v = votes + (size_t)blockIdx.y * n;
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < len; o += gridDim.x * blockDim.x) {
    float mx = -INFINITY;
    for (int j = max(0, o - pad); j < min(n, o - pad + kernel); j++) mx = fmaxf(mx, v[j]);
    pooled[(size_t)blockIdx.y * len + o] = mx;
  }
}

// Unsigned bits whose order is the float's total order (attention/TopK.sortable, shifted).
__device__ __forceinline__ unsigned ts_key(float f) {
  unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Top-k of each row of vals (lists, n), ties to the lower index, ascending (attention/TopK.select),
// in four kernels so many blocks share the reads: radix select on two 16-bit digits (ts_topk_hist
// then ts_topk_resolve, twice) finds the count-th largest key T and how many keys == T to take
// (state (lists, 2) u32: the digit prefix, then T; the keys still to take); ts_topk_count counts
// keys > T and == T per block segment; ts_topk_write writes each segment's picks in index order.
// hist (lists, 65536) u32 is zero between uses (resolve clears what it read). Grids (blocks, lists)
// with the same block count for count and write. count >= n: write takes every index, then the last
// repeated (the CPU's padding), and the other kernels do nothing.
#define TS_BINS 65536

__device__ __forceinline__ unsigned ts_digit(unsigned u, int pass) { return pass ? (u & 0xFFFFu) : (u >> 16); }

extern "C" __global__ void ts_topk_hist(unsigned* __restrict__ hist, const unsigned* __restrict__ state,
                                        const float* __restrict__ vals, const int* __restrict__ hit, int n, int count,
                                        int pass) {
  if (*hit || count >= n) return;
  int list = blockIdx.y, lane = threadIdx.x & 31;
  const float* v = vals + (size_t)list * n;
  unsigned* h = hist + (size_t)list * TS_BINS;
  unsigned hi = pass ? state[list * 2] : 0u;
  for (int i0 = blockIdx.x * blockDim.x; i0 < n; i0 += gridDim.x * blockDim.x) {  // block-uniform trip count
    int i = i0 + threadIdx.x;
    unsigned u = i < n ? ts_key(v[i]) : 0u;
    bool in = i < n && (pass == 0 || (u >> 16) == hi);
    unsigned digit = in ? ts_digit(u, pass) : 0xFFFFFFFFu;
    unsigned peers = __match_any_sync(0xffffffffu, digit);  // one atomic per distinct digit per warp
    if (in && (__ffs(peers) - 1) == lane) atomicAdd(&h[digit], (unsigned)__popc(peers));
  }
}

// Exclusive prefix sum over the block in thread order (blockDim a multiple of 32, <= 1024).
__device__ __forceinline__ int ts_block_excl_scan(int x, int* warpSums /* 32 ints of shared memory */) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int incl = x;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    int y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  __syncthreads();
  if (lane == 31) warpSums[warp] = incl;
  __syncthreads();
  int before = 0;
  for (int w = 0; w < warp && w < nw; w++) before += warpSums[w];
  return before + incl - x;
}

// One block per list (grid (1, lists)), 1024 threads: finds the digit where the cumulative count of
// the histogram from the top reaches the keys still to take, records it, clears the histogram.
extern "C" __global__ void ts_topk_resolve(unsigned* __restrict__ hist, unsigned* __restrict__ state,
                                           const int* __restrict__ hit, int n, int count, int pass) {
  if (*hit || count >= n) return;
  __shared__ int warpSums[32];
  int list = blockIdx.y, t = threadIdx.x, per = TS_BINS / blockDim.x;
  unsigned* h = hist + (size_t)list * TS_BINS;
  int rem = pass ? (int)state[list * 2 + 1] : count;
  int top = TS_BINS - 1 - t * per;  // thread t owns bins top, top - 1, .., top - per + 1 (descending)
  int mine = 0;
  for (int j = 0; j < per; j++) mine += (int)h[top - j];
  int before = ts_block_excl_scan(mine, warpSums);
  if (before < rem && rem <= before + mine) {  // exactly one thread
    int acc = before, digit = top - per + 1;
    for (int j = 0; j < per; j++) {
      int c = (int)h[top - j];
      if (acc + c >= rem) {
        digit = top - j;
        break;
      }
      acc += c;
    }
    state[list * 2] = pass ? ((state[list * 2] << 16) | (unsigned)digit) : (unsigned)digit;
    state[list * 2 + 1] = (unsigned)(rem - acc);
  }
  __syncthreads();  // the finder has read its bins
  for (int j = 0; j < per; j++) h[top - j] = 0u;
}

// Segment of block b of a list: [b * seg, min(n, (b + 1) * seg)), seg a multiple of 32.
__device__ __forceinline__ int ts_seg(int n, int blocks) { return ((n + blocks - 1) / blocks + 31) / 32 * 32; }

extern "C" __global__ void ts_topk_count(int* __restrict__ counts, const unsigned* __restrict__ state,
                                         const float* __restrict__ vals, const int* __restrict__ hit, int n,
                                         int count) {
  if (*hit || count >= n) return;
  __shared__ float red[32];
  int list = blockIdx.y, seg = ts_seg(n, gridDim.x);
  int s0 = min(n, blockIdx.x * seg), s1 = min(n, s0 + seg);
  const float* v = vals + (size_t)list * n;
  unsigned T = state[list * 2];
  int gt = 0, eq = 0;
  for (int i = s0 + threadIdx.x; i < s1; i += blockDim.x) {
    unsigned u = ts_key(v[i]);
    gt += u > T;
    eq += u == T;
  }
  // counts stay below 2^24 per block, exact in f32
  float g = block_sum((float)gt, red);
  float e = block_sum((float)eq, red);
  if (threadIdx.x == 0) {
    counts[((size_t)list * gridDim.x + blockIdx.x) * 2] = (int)g;
    counts[((size_t)list * gridDim.x + blockIdx.x) * 2 + 1] = (int)e;
  }
}

extern "C" __global__ void ts_topk_write(int* __restrict__ top, const int* __restrict__ counts,
                                         const unsigned* __restrict__ state, const float* __restrict__ vals,
                                         const int* __restrict__ hit, int n, int count, int base) {
  if (*hit) return;
  int list = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
  int* out = top + (size_t)list * count;
  if (count >= n) {
    if (blockIdx.x == 0) for (int i = tid; i < count; i += blockDim.x) out[i] = base + min(i, n - 1);
    return;
  }
  __shared__ int wG[32], wE[32];
  const float* v = vals + (size_t)list * n;
  unsigned T = state[list * 2];
  int need = (int)state[list * 2 + 1];  // keys == T to take, lowest indices first; all keys > T are taken
  int gBefore = 0, eSeen = 0;
  for (int b = 0; b < (int)blockIdx.x; b++) {
    gBefore += counts[((size_t)list * gridDim.x + b) * 2];
    eSeen += counts[((size_t)list * gridDim.x + b) * 2 + 1];
  }
  int seg = ts_seg(n, gridDim.x);
  int b0 = min(n, blockIdx.x * seg), b1 = min(n, b0 + seg);
  int wseg = ((b1 - b0 + nw - 1) / nw + 31) / 32 * 32;
  int s0 = min(b1, b0 + warp * wseg), s1 = min(b1, s0 + wseg);
  int gt = 0, eq = 0;
  for (int i0 = s0; i0 < s1; i0 += 32) {  // warp-uniform: ballots
    int i = i0 + lane;
    unsigned u = i < s1 ? ts_key(v[i]) : 0u;
    gt += __popc(__ballot_sync(0xffffffffu, i < s1 && u > T));
    eq += __popc(__ballot_sync(0xffffffffu, i < s1 && u == T));
  }
  if (lane == 0) {
    wG[warp] = gt;
    wE[warp] = eq;
  }
  __syncthreads();
  for (int w = 0; w < warp; w++) {
    gBefore += wG[w];
    eSeen += wE[w];
  }
  int pos = gBefore + min(eSeen, need);
  unsigned below = (1u << lane) - 1u;
  for (int i0 = s0; i0 < s1; i0 += 32) {
    int i = i0 + lane;
    unsigned u = i < s1 ? ts_key(v[i]) : 0u;
    bool isGt = i < s1 && u > T, isEq = i < s1 && u == T;
    unsigned eqMask = __ballot_sync(0xffffffffu, isEq);
    bool sel = isGt || (isEq && eSeen + __popc(eqMask & below) < need);
    unsigned selMask = __ballot_sync(0xffffffffu, sel);
    if (sel) out[pos + __popc(selMask & below)] = base + i;
    pos += __popc(selMask);
    eSeen += __popc(eqMask);
  }
}

// lists (nLists, listLen) int = [0, sinks) ++ top (nLists, count) ++ [end - local, end). Grid (x, nLists).
extern "C" __global__ void ts_build_lists(int* __restrict__ lists, const int* __restrict__ top, int count, int sinks,
                                          int local, int end, int listLen) {
  int g = blockIdx.y;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < listLen; i += gridDim.x * blockDim.x) {
    int s;
    if (i < sinks) s = i;
    else if (i < sinks + count) s = top[(size_t)g * count + i - sinks];
    else s = end - local + (i - sinks - count);
    lists[(size_t)g * listLen + i] = s;
  }
}

// The int4 scoring copy of slots slot0 .. slot0 + gridDim.x - 1, grid (slots, nKv), block 32 *
// ceil(d / 64): per (slot, KV head) scale = max|k| / 7 into ks (slots, nKv) f32 and round(k / scale)
// (floor(x + 0.5), clamped to [-7, 7], 0 for a zero scale) packed two per byte, even element in the
// low nibble, into kq (slots, nKv, d / 2). As TokenSelect.quantise on the CPU.
extern "C" __global__ void ts_quantise(unsigned char* __restrict__ kq, float* __restrict__ ks,
                                       const bf16* __restrict__ kPre, const int* __restrict__ pageTable, int nKv,
                                       int d, int pageSize, int slot0) {
  __shared__ float red[32];
  int slot = slot0 + blockIdx.x, g = blockIdx.y, j = threadIdx.x, half = d / 2;
  const bf16* k = kPre + kv_offset(pageTable, slot, g, nKv, pageSize, d);
  float a = 0.f, b = 0.f;
  if (j < half) {
    a = bf2f(k[2 * j]);
    b = bf2f(k[2 * j + 1]);
  }
  float mx = block_max(fmaxf(fabsf(a), fabsf(b)), red);
  float scale = __fdiv_rn(mx, 7.f);
  if (j < half) {
    int qa = 0, qb = 0;
    if (scale > 0.f) {
      qa = max(-7, min(7, (int)floorf(__fadd_rn(__fdiv_rn(a, scale), 0.5f))));
      qb = max(-7, min(7, (int)floorf(__fadd_rn(__fdiv_rn(b, scale), 0.5f))));
    }
    kq[((size_t)slot * nKv + g) * half + j] = (unsigned char)((qa & 15) | ((qb & 15) << 4));
  }
  if (j == 0) ks[(size_t)slot * nKv + g] = scale;
}
