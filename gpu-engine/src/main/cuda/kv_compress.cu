// KV compression after prefill (SelKV, SnapKV, StreamingLLM eviction) on the device. CPU twins:
// attention/ObservationWindow, SelKv, SnapKv, StreamingLlm.Eviction, TopK and cpu/KvCache.retain.
// Launch wrappers: io.longsieve.cuda.KvCompressKernels. One layer at a time:
//   kvc_obs_store / kvc_obs_rope: the observation window (last W prompt queries, a ring per layer)
//       and its rows rotated at their positions;
//   kvc_obs_scores (pass 0: per-tile softmax stats, pass 1: probabilities summed per head) +
//       kvc_obs_stats: attn[h, j] = sum over window rows of softmax(q_r . k_j * scale + bias)[j];
//   kvc_vnorm, kvc_mul_slice, kvc_avg_pool, kvc_group_sum, kvc_union_mask: scores and votes;
//   kvc_topk_flags: deterministic top-k per row (radix select; ties to the lower index, as TopK);
//   kvc_lists: keep / drop lists (ascending) per KV head from the flags;
//   kvc_inv_norm, kvc_nearest: nearest kept key per dropped key by cosine (tiled f32 GEMM + argmax);
//       kvc_unit_split + kvc_nearest_mma_d64/_d128: the same on tensor cores (keys split hi + lo);
//   kvc_merge_acc, kvc_merge_apply: SelKV's gated merge and the logit bias alpha * log R_t;
//   kvc_gather, kvc_scatter, kvc_zero_bias: compaction through scratch (in-place moves would race).
#include "common.cuh"

// ---------------------------------------------------------------------------------------------
// observation window

// ring (w, qDim) f32 row (start + i) % w = qPre row (from + i) (stride f32), i < nRows. Grid nRows.
extern "C" __global__ void kvc_obs_store(float* __restrict__ ring, const float* __restrict__ qPre, int stride,
                                         int from, int start, int w, int qDim) {
  const int i = blockIdx.x;
  float* dst = ring + (size_t)((start + i) % w) * qDim;
  const float* src = qPre + (size_t)(from + i) * stride;
  for (int c = threadIdx.x; c < qDim; c += blockDim.x) dst[c] = src[c];
}

// qr (heads, cnt, d) f32 = window row r (ring row (head0 + r) % w, oldest first) rotated at position
// posLast - (cnt - 1 - r), as model/Rope.apply in f32. Grid cnt.
extern "C" __global__ void kvc_obs_rope(float* __restrict__ qr, const float* __restrict__ ring, int head0, int w,
                                        int cnt, int heads, int d, const float* __restrict__ invFreq, int posLast) {
  const int r = blockIdx.x, half = d / 2;
  const int pos = posLast - (cnt - 1 - r);
  const float* src = ring + (size_t)((head0 + r) % w) * heads * d;
  for (int t = threadIdx.x; t < heads * half; t += blockDim.x) {
    int h = t / half, i = t % half;
    float c, s;
    rope_cs(pos, invFreq[i], &c, &s);
    float x1 = src[h * d + i], x2 = src[h * d + half + i];
    float* dst = qr + ((size_t)h * cnt + r) * d;
    dst[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    dst[half + i] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
  }
}

#define KVC_T 64    // rows and keys per tile of the tiled dot products
#define KVC_DC 32   // head-dim chunk staged in shared memory

// acc[a][b] = dot(A row ty + 16a, B row tx + 16b) over d, both staged chunk by chunk; loadA/loadB
// fill (KVC_T, KVC_DC + 1) f32 tiles with chunk e0 (zeros outside). 256 threads.
template <typename LA, typename LB>
__device__ __forceinline__ void tile_dots(float acc[4][4], float* sA, float* sB, int d, LA loadA, LB loadB) {
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
#pragma unroll
  for (int a = 0; a < 4; a++)
#pragma unroll
    for (int b = 0; b < 4; b++) acc[a][b] = 0.f;
  for (int e0 = 0; e0 < d; e0 += KVC_DC) {
    __syncthreads();
    loadA(sA, e0);
    loadB(sB, e0);
    __syncthreads();
#pragma unroll 8
    for (int e = 0; e < KVC_DC; e++) {
      float av[4], bv[4];
#pragma unroll
      for (int a = 0; a < 4; a++) av[a] = sA[(ty + 16 * a) * (KVC_DC + 1) + e];
#pragma unroll
      for (int b = 0; b < 4; b++) bv[b] = sB[(tx + 16 * b) * (KVC_DC + 1) + e];
#pragma unroll
      for (int a = 0; a < 4; a++)
#pragma unroll
        for (int b = 0; b < 4; b++) acc[a][b] = fmaf(av[a], bv[b], acc[a][b]);
    }
  }
}

// Observation attention of KV head g = blockIdx.z: rows i < R = G * cnt (head g*G + i / cnt, window
// row i % cnt at slot n - cnt + i % cnt), keys j < n of kRope. Grid (ceil(n/64), ceil(R/64), nKv),
// 256 threads. pass 0: partial (rows of all heads = heads * cnt, tiles, 2) (max, sum) of this tile;
// pass 1: attn (heads, n) += softmax probability with the row's (max, sum) from stats (heads * cnt, 2).
extern "C" __global__ void __launch_bounds__(256)
    kvc_obs_scores(int pass, float* __restrict__ partial, const float* __restrict__ stats, float* __restrict__ attn,
                   const float* __restrict__ qr, const bf16* __restrict__ kRope, const int* __restrict__ pageTable,
                   const float* __restrict__ bias, int n, int cnt, int heads, int nKv, int d, int pageSize,
                   float scale) {
  __shared__ float sA[KVC_T * (KVC_DC + 1)], sB[KVC_T * (KVC_DC + 1)];
  __shared__ float sAttn[16][KVC_T];
  const int g = blockIdx.z, G = heads / nKv, R = G * cnt;
  const int i0 = blockIdx.y * KVC_T, j0 = blockIdx.x * KVC_T, tiles = gridDim.x;
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  auto loadA = [&](float* s, int e0) {
    for (int c = tid; c < KVC_T * KVC_DC; c += 256) {
      int r = c / KVC_DC, e = c % KVC_DC, i = i0 + r;
      float x = 0.f;
      if (i < R && e0 + e < d) x = qr[((size_t)(g * G + i / cnt) * cnt + i % cnt) * d + e0 + e];
      s[r * (KVC_DC + 1) + e] = x;
    }
  };
  auto loadB = [&](float* s, int e0) {
    for (int c = tid; c < KVC_T * KVC_DC; c += 256) {
      int r = c / KVC_DC, e = c % KVC_DC, j = j0 + r;
      float x = 0.f;
      if (j < n && e0 + e < d) x = bf2f(kRope[kv_offset(pageTable, j, g, nKv, pageSize, d) + e0 + e]);
      s[r * (KVC_DC + 1) + e] = x;
    }
  };
  float acc[4][4];
  tile_dots(acc, sA, sB, d, loadA, loadB);
  // logits, masked: causal (key after the row's slot), rows past R, keys past n
#pragma unroll
  for (int a = 0; a < 4; a++) {
    int i = i0 + ty + 16 * a;
    int slot = i < R ? n - cnt + i % cnt : -1;
#pragma unroll
    for (int b = 0; b < 4; b++) {
      int j = j0 + tx + 16 * b;
      float s = -INFINITY;
      if (j <= slot && j < n) s = acc[a][b] * scale + (bias ? bias[(size_t)j * nKv + g] : 0.f);
      acc[a][b] = s;
    }
  }
  if (pass == 0) {
#pragma unroll
    for (int a = 0; a < 4; a++) {
      float m = fmaxf(fmaxf(acc[a][0], acc[a][1]), fmaxf(acc[a][2], acc[a][3]));
      for (int o = 8; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
      float l = 0.f;
      if (m != -INFINITY)
#pragma unroll
        for (int b = 0; b < 4; b++) l += expf(acc[a][b] - m);
      for (int o = 8; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
      int i = i0 + ty + 16 * a;
      if (tx == 0 && i < R) {
        size_t row = (size_t)(g * G + i / cnt) * cnt + i % cnt;
        partial[(row * tiles + blockIdx.x) * 2] = m;
        partial[(row * tiles + blockIdx.x) * 2 + 1] = l;
      }
    }
    return;
  }
  for (int c = tid; c < 16 * KVC_T; c += 256) sAttn[c / KVC_T][c % KVC_T] = 0.f;
  __syncthreads();
  const int hl0 = i0 / cnt;  // head (within the group) of the tile's first row
#pragma unroll
  for (int a = 0; a < 4; a++) {
    int i = i0 + ty + 16 * a;
    if (i >= R) continue;
    size_t row = (size_t)(g * G + i / cnt) * cnt + i % cnt;
    float M = stats[row * 2], inv = 1.f / stats[row * 2 + 1];
    const int hl = i / cnt - hl0;
#pragma unroll
    for (int b = 0; b < 4; b++) {
      if (acc[a][b] == -INFINITY) continue;
      float p = expf(acc[a][b] - M) * inv;
      // a tile spans up to 64 / cnt + 2 heads: past 16 (G > 16 with a window of 4 or fewer rows)
      // straight to global memory rather than past the end of sAttn
      if (hl < 16) atomicAdd(&sAttn[hl][tx + 16 * b], p);
      else atomicAdd(&attn[(size_t)(g * G + i / cnt) * n + j0 + tx + 16 * b], p);
    }
  }
  __syncthreads();
  const int hl1 = min(min(R - 1, i0 + KVC_T - 1) / cnt, hl0 + 15);
  for (int c = tid; c < (hl1 - hl0 + 1) * KVC_T; c += 256) {
    int hl = c / KVC_T, jj = c % KVC_T, j = j0 + jj;
    if (j < n && sAttn[hl][jj] != 0.f) atomicAdd(&attn[(size_t)(g * G + hl0 + hl) * n + j], sAttn[hl][jj]);
  }
}

// stats (rows, 2) = (max, sum) of each row's softmax from its tiles' partial (rows, tiles, 2). A warp per row.
extern "C" __global__ void kvc_obs_stats(float* __restrict__ stats, const float* __restrict__ partial, int rows,
                                         int tiles) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* p = partial + (size_t)row * tiles * 2;
  float m = -INFINITY;
  for (int t = lane; t < tiles; t += 32) m = fmaxf(m, p[t * 2]);
  m = warp_max(m);
  float l = 0.f;
  for (int t = lane; t < tiles; t += 32)
    if (p[t * 2] != -INFINITY) l += p[t * 2 + 1] * expf(p[t * 2] - m);
  l = warp_sum(l);
  if (lane == 0) {
    stats[row * 2] = m;
    stats[row * 2 + 1] = l;
  }
}

// ---------------------------------------------------------------------------------------------
// scores and votes

// vnorm (nKv, n) = sum over d of |v|. A warp per (g, slot).
extern "C" __global__ void kvc_vnorm(float* __restrict__ vnorm, const bf16* __restrict__ v,
                                     const int* __restrict__ pageTable, int n, int nKv, int d, int pageSize) {
  const long long w = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (w >= (long long)nKv * n) return;
  const int g = (int)(w / n), j = (int)(w % n);
  const bf16* p = v + kv_offset(pageTable, j, g, nKv, pageSize, d);
  float s = 0.f;
  for (int e = lane; e < d; e += 32) s += fabsf(bf2f(p[e]));
  s = warp_sum(s);
  if (lane == 0) vnorm[w] = s;
}

// out (heads, len) = attn[h, off + j] * vnorm[h / G, off + j]: SelKV's raw score a * |v|_1.
extern "C" __global__ void kvc_mul_slice(float* __restrict__ out, const float* __restrict__ attn,
                                         const float* __restrict__ vnorm, int n, int off, int len, int heads, int G) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= (long long)heads * len) return;
  const int h = (int)(t / len), j = (int)(t % len);
  out[t] = attn[(size_t)h * n + off + j] * vnorm[(size_t)(h / G) * n + off + j];
}

// dst (rows, n) = torch avg_pool1d(kernel, stride 1, padding kernel / 2) of src (rows, n), as
// TokenSparseAttention.avgPool: window sums in index order, / kernel; even kernels leave the last 0.
extern "C" __global__ void kvc_avg_pool(float* __restrict__ dst, const float* __restrict__ src, int rows, int n,
                                        int kernel) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= (long long)rows * n) return;
  const int row = (int)(t / n), o = (int)(t % n), pad = kernel / 2, len = n + 2 * pad - kernel + 1;
  const float* s = src + (size_t)row * n;
  float acc = 0.f;
  if (o < len) {
    for (int j = o - pad; j < o - pad + kernel; j++)
      if (j >= 0 && j < n) acc += s[j];
    acc = acc / (float)kernel;
  }
  dst[t] = acc;
}

// dst (nKv, len) = sum over the group's heads h (ascending) of src[h * ld + j].
extern "C" __global__ void kvc_group_sum(float* __restrict__ dst, const float* __restrict__ src, int ld, int len,
                                         int nKv, int G) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= (long long)nKv * len) return;
  const int g = (int)(t / len), j = (int)(t % len);
  float s = 0.f;
  for (int h = g * G; h < (g + 1) * G; h++) s += src[(size_t)h * ld + j];
  dst[t] = s;
}

// sum (nKv, len): -inf where no head of the group proposed the slot (flags (heads, len)).
extern "C" __global__ void kvc_union_mask(float* __restrict__ sum, const unsigned char* __restrict__ flags, int len,
                                          int nKv, int G) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= (long long)nKv * len) return;
  const int g = (int)(t / len), j = (int)(t % len);
  bool any = false;
  for (int h = g * G; h < (g + 1) * G; h++) any |= flags[(size_t)h * len + j] != 0;
  if (!any) sum[t] = -INFINITY;
}

// ---------------------------------------------------------------------------------------------
// top-k and lists

// An unsigned int whose order is TopK.sortable's (the float total order, -0 below +0).
__device__ __forceinline__ unsigned kvc_key(float f) {
  unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Exclusive scan of 0/1 flags over the block (blockDim multiple of 32); *total gets the block's sum.
__device__ __forceinline__ int kvc_scan01(int v, int* sWarp /* 33 ints */, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  unsigned b = __ballot_sync(0xffffffffu, v);
  int inWarp = __popc(b & ((1u << lane) - 1u));
  __syncthreads();
  if (lane == 0) sWarp[warp] = __popc(b);
  __syncthreads();
  if (warp == 0) {
    int x = lane < nw ? sWarp[lane] : 0, incl = x;
    for (int o = 1; o < 32; o <<= 1) {
      int y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    if (lane < nw) sWarp[lane] = incl - x;
    if (lane == 31) sWarp[32] = incl;
  }
  __syncthreads();
  *total = sWarp[32];
  return sWarp[warp] + inWarp;
}

// flags (rows, n) u8 at flags + row * flagLd: 1 for the k largest score[row * ld + j], j < n, ties
// to the lower index (TopK.select: k >= n takes all, k <= 0 none). One block (1024 threads) per row:
// a radix select of the k-th largest key, then the keys above it and the first equal ones in index order.
extern "C" __global__ void __launch_bounds__(1024)
    kvc_topk_flags(unsigned char* __restrict__ flags, int flagLd, const float* __restrict__ score, int ld, int n,
                   int k) {
  __shared__ int hist[256];
  __shared__ unsigned sPrefix;
  __shared__ int sRemain;
  __shared__ int sWarp[33];
  const float* s = score + (size_t)blockIdx.x * ld;
  unsigned char* f = flags + (size_t)blockIdx.x * flagLd;
  const int tid = threadIdx.x, nt = blockDim.x;
  if (k >= n || k <= 0) {
    for (int j = tid; j < n; j += nt) f[j] = k > 0 ? 1 : 0;
    return;
  }
  if (tid == 0) {
    sPrefix = 0;
    sRemain = k;
  }
  unsigned mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += nt) hist[b] = 0;
    __syncthreads();
    const unsigned prefix = sPrefix;
    for (int j = tid; j < n; j += nt) {
      unsigned u = kvc_key(s[j]);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1);
    }
    __syncthreads();
    if (tid == 0) {
      int remain = sRemain, above = 0, b = 255;
      for (; b > 0; b--) {
        if (above + hist[b] >= remain) break;
        above += hist[b];
      }
      sRemain = remain - above;
      sPrefix = prefix | ((unsigned)b << shift);
    }
    mask |= 255u << shift;
    __syncthreads();
  }
  const unsigned T = sPrefix;
  const int takeEqual = sRemain;  // keys equal to T to take, lowest indices first
  int before = 0;
  for (int base = 0; base < n; base += nt) {
    int j = base + tid;
    unsigned u = j < n ? kvc_key(s[j]) : 0u;
    int eq = j < n && u == T, total;
    int rank = before + kvc_scan01(eq, sWarp, &total);
    if (j < n) f[j] = (u > T || (eq && rank < takeEqual)) ? 1 : 0;
    before += total;
  }
}

// Keep and drop lists of KV head g = blockIdx.x over slots [0, n): kept are slots < lo, slots >= hi
// and slot lo + j where flags[g * flagLd + j]; keep (nKv, keepLd) and drop (nKv, dropLd) (or null)
// ascending; counts (nKv, 2) = (kept, dropped). One block (1024 threads) per KV head.
extern "C" __global__ void __launch_bounds__(1024)
    kvc_lists(int* __restrict__ keep, int keepLd, int* __restrict__ drop, int dropLd, int* __restrict__ counts,
              const unsigned char* __restrict__ flags, int flagLd, int n, int lo, int hi) {
  __shared__ int sWarp[33];
  const int g = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  int kept = 0, dropped = 0;
  for (int base = 0; base < n; base += nt) {
    int j = base + tid;
    int on = j < n && (j < lo || j >= hi || flags[(size_t)g * flagLd + j - lo] != 0);
    int total;
    int r = kvc_scan01(on, sWarp, &total);
    if (j < n) {
      if (on) {
        if (kept + r < keepLd) keep[(size_t)g * keepLd + kept + r] = j;
      } else if (drop) {
        int q = dropped + tid - r;  // the chunk's dropped slots before j: tid - (kept before j)
        if (q < dropLd) drop[(size_t)g * dropLd + q] = j;
      }
    }
    kept += total;
    dropped += min(nt, n - base) - total;
  }
  if (tid == 0) {
    counts[g * 2] = kept;
    counts[g * 2 + 1] = dropped;
  }
}

// ---------------------------------------------------------------------------------------------
// SelKV merge

// inv (nKv, n) = 1 / |kPre| (0 for a zero key), the norm summed in double as SelKv.unit. A warp per (g, slot).
extern "C" __global__ void kvc_inv_norm(float* __restrict__ inv, const bf16* __restrict__ kPre,
                                        const int* __restrict__ pageTable, int n, int nKv, int d, int pageSize) {
  const long long w = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (w >= (long long)nKv * n) return;
  const int g = (int)(w / n), j = (int)(w % n);
  const bf16* p = kPre + kv_offset(pageTable, j, g, nKv, pageSize, d);
  double ss = 0;
  for (int e = lane; e < d; e += 32) {
    double x = bf2f(p[e]);
    ss += x * x;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) inv[w] = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.f;
}

// For every dropped slot i of KV head g = blockIdx.y (drop (nKv, nDrop)): best (nKv, nDrop) = index t
// into keep (nKv, nKeep) of the kept slot whose unit pre-RoPE key has the highest cosine with i's
// (first maximum: ties to the lower t), bestCos its cosine. 64 dropped rows per block against every
// 64-key kept tile; 256 threads.
extern "C" __global__ void __launch_bounds__(256)
    kvc_nearest(int* __restrict__ best, float* __restrict__ bestCos, const int* __restrict__ keep, int nKeep,
                const int* __restrict__ drop, int nDrop, const float* __restrict__ inv, const bf16* __restrict__ kPre,
                const int* __restrict__ pageTable, int n, int nKv, int d, int pageSize) {
  __shared__ float sA[KVC_T * (KVC_DC + 1)], sB[KVC_T * (KVC_DC + 1)];
  const int g = blockIdx.y, i0 = blockIdx.x * KVC_T, tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int* dg = drop + (size_t)g * nDrop;
  const int* kg = keep + (size_t)g * nKeep;
  float bv[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int bi[4] = {0, 0, 0, 0};
  for (int t0 = 0; t0 < nKeep; t0 += KVC_T) {
    auto loadA = [&](float* s, int e0) {
      for (int c = tid; c < KVC_T * KVC_DC; c += 256) {
        int r = c / KVC_DC, e = c % KVC_DC, i = i0 + r;
        float x = 0.f;
        if (i < nDrop && e0 + e < d) {
          int slot = dg[i];
          x = bf2f(kPre[kv_offset(pageTable, slot, g, nKv, pageSize, d) + e0 + e]) * inv[(size_t)g * n + slot];
        }
        s[r * (KVC_DC + 1) + e] = x;
      }
    };
    auto loadB = [&](float* s, int e0) {
      for (int c = tid; c < KVC_T * KVC_DC; c += 256) {
        int r = c / KVC_DC, e = c % KVC_DC, t = t0 + r;
        float x = 0.f;
        if (t < nKeep && e0 + e < d) {
          int slot = kg[t];
          x = bf2f(kPre[kv_offset(pageTable, slot, g, nKv, pageSize, d) + e0 + e]) * inv[(size_t)g * n + slot];
        }
        s[r * (KVC_DC + 1) + e] = x;
      }
    };
    float acc[4][4];
    tile_dots(acc, sA, sB, d, loadA, loadB);
#pragma unroll
    for (int a = 0; a < 4; a++) {
      // this thread's keys ascend with b; then the 16 threads of the row, lower index on ties
      float v = -INFINITY;
      int idx = 0x7fffffff;
#pragma unroll
      for (int b = 0; b < 4; b++) {
        int t = t0 + tx + 16 * b;
        if (t < nKeep && acc[a][b] > v) {
          v = acc[a][b];
          idx = t;
        }
      }
      for (int o = 8; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, o);
        int oi = __shfl_xor_sync(0xffffffffu, idx, o);
        if (ov > v || (ov == v && oi < idx)) {
          v = ov;
          idx = oi;
        }
      }
      if (v > bv[a]) {  // earlier tiles hold lower indices: strict keeps them on ties
        bv[a] = v;
        bi[a] = idx;
      }
    }
  }
  if (tx == 0) {
#pragma unroll
    for (int a = 0; a < 4; a++) {
      int i = i0 + ty + 16 * a;
      if (i < nDrop) {
        best[(size_t)g * nDrop + i] = bi[a];
        bestCos[(size_t)g * nDrop + i] = bv[a];
      }
    }
  }
}

// hi, lo (nKv, m, d) bf16: the unit pre-RoPE key of slot list[g, i] (list (nKv, m)) split as
// x = hi + lo (hi = bf16(x), lo = bf16(x - hi)), so three bf16 products carry about 16 bits of it.
// Grid (m, nKv), threads over d.
extern "C" __global__ void kvc_unit_split(bf16* __restrict__ hi, bf16* __restrict__ lo, const int* __restrict__ list,
                                          int m, const float* __restrict__ inv, const bf16* __restrict__ kPre,
                                          const int* __restrict__ pageTable, int n, int nKv, int d, int pageSize) {
  const int i = blockIdx.x, g = blockIdx.y;
  const int slot = list[(size_t)g * m + i];
  const size_t o = kv_offset(pageTable, slot, g, nKv, pageSize, d), w = ((size_t)g * m + i) * d;
  const float s = inv[(size_t)g * n + slot];
  for (int e = threadIdx.x; e < d; e += blockDim.x) {
    float x = bf2f(kPre[o + e]) * s;
    bf16 h = f2bf(x);
    hi[w + e] = h;
    lo[w + e] = f2bf(x - bf2f(h));
  }
}

// kvc_nearest on tensor cores: the same result from split unit keys (kvc_unit_split) of the dropped
// rows dHi/dLo (nKv, nDrop, D) and kept keys kHi/kLo (nKv, nKeep, D); cos = hi.hi + hi.lo + lo.hi
// (mma_bf16, f32 accumulation). Block: 64 dropped rows (4 warps x 16) against each 64-key kept tile;
// first maximum wins (ties to the lower kept index). Dynamic shared memory 4 * 64 * (D + 8) bf16.
template <int D>
__device__ __forceinline__ void nearest_mma(int* __restrict__ best, float* __restrict__ bestCos,
                                            const bf16* __restrict__ dHi, const bf16* __restrict__ dLo, int nDrop,
                                            const bf16* __restrict__ kHi, const bf16* __restrict__ kLo, int nKeep) {
  constexpr int LD = D + 8;
  extern __shared__ __align__(16) unsigned char nm_smem[];
  bf16* sA = reinterpret_cast<bf16*>(nm_smem);  // (2, 64, LD) dropped rows: hi, lo
  bf16* sB = sA + 2 * 64 * LD;                  // (2, 64, LD) kept keys: hi, lo
  const int g = blockIdx.y, i0 = blockIdx.x * 64, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const bf16* ah = dHi + (size_t)g * nDrop * D;
  const bf16* al = dLo + (size_t)g * nDrop * D;
  const bf16* bh = kHi + (size_t)g * nKeep * D;
  const bf16* bl = kLo + (size_t)g * nKeep * D;
  for (int c = tid; c < 64 * D / 8; c += 128) {
    int r = c / (D / 8), col = (c % (D / 8)) * 8, i = i0 + r;
    uint4 h = make_uint4(0, 0, 0, 0), l = h;
    if (i < nDrop) {
      h = *reinterpret_cast<const uint4*>(ah + (size_t)i * D + col);
      l = *reinterpret_cast<const uint4*>(al + (size_t)i * D + col);
    }
    *reinterpret_cast<uint4*>(sA + r * LD + col) = h;
    *reinterpret_cast<uint4*>(sA + 64 * LD + r * LD + col) = l;
  }
  __syncthreads();
  unsigned fh[D / 16][4], fl[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    const bf16* p = sA + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8;
    ldmatrix_x4(fh[kk][0], fh[kk][1], fh[kk][2], fh[kk][3], p);
    ldmatrix_x4(fl[kk][0], fl[kk][1], fl[kk][2], fl[kk][3], p + 64 * LD);
  }
  float bv[2] = {-INFINITY, -INFINITY};
  int bi[2] = {0, 0};
  const int qd = lane & 3;
  for (int t0 = 0; t0 < nKeep; t0 += 64) {
    __syncthreads();  // every warp is done with the previous tile
    for (int c = tid; c < 64 * D / 8; c += 128) {
      int r = c / (D / 8), col = (c % (D / 8)) * 8, t = t0 + r;
      uint4 h = make_uint4(0, 0, 0, 0), l = h;
      if (t < nKeep) {
        h = *reinterpret_cast<const uint4*>(bh + (size_t)t * D + col);
        l = *reinterpret_cast<const uint4*>(bl + (size_t)t * D + col);
      }
      *reinterpret_cast<uint4*>(sB + r * LD + col) = h;
      *reinterpret_cast<uint4*>(sB + 64 * LD + r * LD + col) = l;
    }
    __syncthreads();
    float s[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[j][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
      for (int np = 0; np < 4; np++) {
        const bf16* kb = sB + (np * 16 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 + ((lane >> 3) & 1) * 8;
        unsigned b0, b1, b2, b3, c0, c1, c2, c3;
        ldmatrix_x4(b0, b1, b2, b3, kb);
        ldmatrix_x4(c0, c1, c2, c3, kb + 64 * LD);
        mma_bf16(s[2 * np], fl[kk], b0, b1);  // the small terms first
        mma_bf16(s[2 * np + 1], fl[kk], b2, b3);
        mma_bf16(s[2 * np], fh[kk], c0, c1);
        mma_bf16(s[2 * np + 1], fh[kk], c2, c3);
        mma_bf16(s[2 * np], fh[kk], b0, b1);
        mma_bf16(s[2 * np + 1], fh[kk], b2, b3);
      }
#pragma unroll
    for (int r = 0; r < 2; r++) {
      // this thread's keys ascend with (j, e); then the quad's four threads, lower index on ties
      float v = -INFINITY;
      int idx = 0x7fffffff;
#pragma unroll
      for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e2 = 0; e2 < 2; e2++) {
          int t = t0 + j * 8 + qd * 2 + e2;
          float x = s[j][r * 2 + e2];
          if (t < nKeep && x > v) {
            v = x;
            idx = t;
          }
        }
#pragma unroll
      for (int o = 1; o <= 2; o <<= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, o);
        int oi = __shfl_xor_sync(0xffffffffu, idx, o);
        if (ov > v || (ov == v && oi < idx)) {
          v = ov;
          idx = oi;
        }
      }
      if (v > bv[r]) {  // earlier tiles hold lower indices: strict keeps them on ties
        bv[r] = v;
        bi[r] = idx;
      }
    }
  }
  if (qd == 0) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      int i = i0 + warp * 16 + (lane >> 2) + r * 8;
      if (i < nDrop) {
        best[(size_t)g * nDrop + i] = bi[r];
        bestCos[(size_t)g * nDrop + i] = bv[r];
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(128)
    kvc_nearest_mma_d64(int* best, float* bestCos, const bf16* dHi, const bf16* dLo, int nDrop, const bf16* kHi,
                        const bf16* kLo, int nKeep) {
  nearest_mma<64>(best, bestCos, dHi, dLo, nDrop, kHi, kLo, nKeep);
}
extern "C" __global__ void __launch_bounds__(128)
    kvc_nearest_mma_d128(int* best, float* bestCos, const bf16* dHi, const bf16* dLo, int nDrop, const bf16* kHi,
                         const bf16* kLo, int nKeep) {
  nearest_mma<128>(best, bestCos, dHi, dLo, nDrop, kHi, kLo, nKeep);
}

// Mass of slot j for KV head g: the observation attention summed over the group's heads.
__device__ __forceinline__ float kvc_group_mass(const float* attn, int n, int g, int G, int j) {
  float s = 0.f;
  for (int h = g * G; h < (g + 1) * G; h++) s += attn[(size_t)h * n + j];
  return s;
}

// Accumulates every dropped slot into its nearest kept slot: gate = max(cos, 0); gateSum, massSum
// (nKv, nKeep); vAcc, kAcc (nKv, nKeep, d) f32 (kAcc null unless merge=kv). A warp per (g, dropped).
extern "C" __global__ void kvc_merge_acc(float* __restrict__ gateSum, float* __restrict__ massSum,
                                         float* __restrict__ vAcc, float* __restrict__ kAcc,
                                         const int* __restrict__ best, const float* __restrict__ bestCos,
                                         const int* __restrict__ drop, int nDrop, int nKeep,
                                         const float* __restrict__ attn, const bf16* __restrict__ kPre,
                                         const bf16* __restrict__ v, const int* __restrict__ pageTable, int n,
                                         int nKv, int G, int d, int pageSize) {
  const long long w = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (w >= (long long)nKv * nDrop) return;
  const int g = (int)(w / nDrop);
  const int slot = drop[w], t = best[w];
  const float gate = fmaxf(bestCos[w], 0.f);
  const size_t at = (size_t)g * nKeep + t;
  if (lane == 0) {
    atomicAdd(&gateSum[at], gate);
    atomicAdd(&massSum[at], kvc_group_mass(attn, n, g, G, slot));
  }
  if (gate == 0.f) return;
  const size_t o = kv_offset(pageTable, slot, g, nKv, pageSize, d);
  for (int e = lane; e < d; e += 32) {
    atomicAdd(&vAcc[at * d + e], gate * bf2f(v[o + e]));
    if (kAcc) atomicAdd(&kAcc[at * d + e], gate * bf2f(kPre[o + e]));
  }
}

// Applies the merge to kept slot t = blockIdx.x of KV head g = blockIdx.y: v = (v + vAcc) / (1 +
// gateSum) (and kPre with kAcc, kRope re-rotated at the slot's position slot + posOffset); bias
// (slots, nKv) += alpha * log((a_t + massSum) / a_t) when massSum > 0 and alpha != 0.
extern "C" __global__ void kvc_merge_apply(bf16* __restrict__ kPre, bf16* __restrict__ kRope, bf16* __restrict__ v,
                                           float* __restrict__ bias, const float* __restrict__ gateSum,
                                           const float* __restrict__ massSum, const float* __restrict__ vAcc,
                                           const float* __restrict__ kAcc, const int* __restrict__ keep, int nKeep,
                                           const float* __restrict__ attn, const int* __restrict__ pageTable,
                                           const float* __restrict__ invFreq, int posOffset, int n, int nKv, int G,
                                           int d, int pageSize, double alpha) {
  const int t = blockIdx.x, g = blockIdx.y, half = d / 2;
  const size_t at = (size_t)g * nKeep + t;
  const int slot = keep[at];
  const size_t o = kv_offset(pageTable, slot, g, nKv, pageSize, d);
  const float gs = gateSum[at];
  if (gs > 0.f) {
    const float invg = 1.f / (1.f + gs);
    for (int e = threadIdx.x; e < d; e += blockDim.x) v[o + e] = f2bf((bf2f(v[o + e]) + vAcc[at * d + e]) * invg);
    if (kAcc) {
      const int pos = slot + posOffset;
      for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float x1 = (bf2f(kPre[o + i]) + kAcc[at * d + i]) * invg;
        float x2 = (bf2f(kPre[o + half + i]) + kAcc[at * d + half + i]) * invg;
        float c, s;
        rope_cs(pos, invFreq[i], &c, &s);
        kPre[o + i] = f2bf(x1);
        kPre[o + half + i] = f2bf(x2);
        kRope[o + i] = f2bf(__fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
        kRope[o + half + i] = f2bf(__fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
      }
    }
  }
  const float ms = massSum[at];
  if (threadIdx.x == 0 && ms > 0.f && alpha != 0.0) {
    double a = fmax((double)kvc_group_mass(attn, n, g, G, slot), 1e-30);
    bias[(size_t)slot * nKv + g] += (float)(alpha * log((a + ms) / a));
  }
}

// ---------------------------------------------------------------------------------------------
// compaction

// Source slot of destination slot i: keep[g * keepLd + i], or without lists every slot but dropSlot.
__device__ __forceinline__ int kvc_from(const int* keep, int keepLd, int g, int i, int dropSlot) {
  return keep ? keep[(size_t)g * keepLd + i] : (i < dropSlot ? i : i + 1);
}

// scratch: 3 x (nKv, rows, d) bf16 (kPre, kRope, v) then (rows, nKv) f32 bias, rows = count - first;
// destination slots first .. count - 1. Grid (rows, nKv), threads over d / 8 (d a multiple of 8).
extern "C" __global__ void kvc_gather(bf16* __restrict__ scratch, const bf16* __restrict__ kPre,
                                      const bf16* __restrict__ kRope, const bf16* __restrict__ v,
                                      const float* __restrict__ bias, const int* __restrict__ pageTable,
                                      const int* __restrict__ keep, int keepLd, int dropSlot, int first, int count,
                                      int nKv, int d, int pageSize) {
  const int r = blockIdx.x, g = blockIdx.y, rows = count - first;
  const int from = kvc_from(keep, keepLd, g, first + r, dropSlot);
  const size_t o = kv_offset(pageTable, from, g, nKv, pageSize, d);
  const size_t plane = (size_t)nKv * rows * d, s = ((size_t)g * rows + r) * d;
  for (int c = threadIdx.x; c < d / 8; c += blockDim.x) {
    reinterpret_cast<uint4*>(scratch + s)[c] = reinterpret_cast<const uint4*>(kPre + o)[c];
    reinterpret_cast<uint4*>(scratch + plane + s)[c] = reinterpret_cast<const uint4*>(kRope + o)[c];
    reinterpret_cast<uint4*>(scratch + 2 * plane + s)[c] = reinterpret_cast<const uint4*>(v + o)[c];
  }
  if (bias && threadIdx.x == 0) {
    float* sb = reinterpret_cast<float*>(scratch + 3 * plane);
    sb[(size_t)r * nKv + g] = bias[(size_t)from * nKv + g];
  }
}

extern "C" __global__ void kvc_scatter(const bf16* __restrict__ scratch, bf16* __restrict__ kPre,
                                       bf16* __restrict__ kRope, bf16* __restrict__ v, float* __restrict__ bias,
                                       const int* __restrict__ pageTable, int first, int count, int nKv, int d,
                                       int pageSize) {
  const int r = blockIdx.x, g = blockIdx.y, rows = count - first;
  const size_t o = kv_offset(pageTable, first + r, g, nKv, pageSize, d);
  const size_t plane = (size_t)nKv * rows * d, s = ((size_t)g * rows + r) * d;
  for (int c = threadIdx.x; c < d / 8; c += blockDim.x) {
    reinterpret_cast<uint4*>(kPre + o)[c] = reinterpret_cast<const uint4*>(scratch + s)[c];
    reinterpret_cast<uint4*>(kRope + o)[c] = reinterpret_cast<const uint4*>(scratch + plane + s)[c];
    reinterpret_cast<uint4*>(v + o)[c] = reinterpret_cast<const uint4*>(scratch + 2 * plane + s)[c];
  }
  if (bias && threadIdx.x == 0) {
    const float* sb = reinterpret_cast<const float*>(scratch + 3 * plane);
    bias[(size_t)(first + r) * nKv + g] = sb[(size_t)r * nKv + g];
  }
}

// bias (slots, nKv) = 0 for slots [from, to) (what KvCache.retain leaves behind the kept slots).
extern "C" __global__ void kvc_zero_bias(float* __restrict__ bias, int from, int to, int nKv) {
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t < (long long)(to - from) * nKv) bias[(size_t)from * nKv + t] = 0.f;
}
