// TokenSelect on the GPU (issue 5 §1): fingerprint, device-side Selection Cache check, scoring of the
// pre-RoPE keys (bf16 or the policy's int4 copy; score=rope: the rotated keys against the query at
// its real positions, ts_real_query) with fused softmax statistics, the soft vote,
// max-pool, radix top-k and the attended lists. CPU twin: attention/TokenSelect.java. Every kernel
// after the cache check (ts_cache_check, or ts_decode_front for one decode row) reads the hit flag
// and returns at once on a hit (the cached top-k is used).
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

// out (heads, d) f32 = mean over rows i < m of head h of qPre row i (rows of qStride f32, before
// RoPE) rotated at row i's angles: row i of the tables cosT, sinT (>= m, d / 2) f32 when cosT is
// non-null, else rope_cs(pos0 + i, invFreq[t]) (model/Rope's angles, computed here). Block (h,
// blockIdx.y) of 256 threads = 32 columns x 8 row groups whose partial sums are added in a fixed order.
__device__ __forceinline__ void ts_mean_rotated(float* __restrict__ out, const float* __restrict__ qPre, int qStride,
                                                int m, int d, const float* __restrict__ cosT,
                                                const float* __restrict__ sinT, const float* __restrict__ invFreq,
                                                int pos0) {
  __shared__ float pa[8][32], pb[8][32];
  int x = threadIdx.x & 31, y = threadIdx.x >> 5;
  int h = blockIdx.x, half = d / 2, t = blockIdx.y * 32 + x;
  float a = 0.f, b = 0.f;
  if (t < half) {
    for (int i = y; i < m; i += 8) {
      const float* src = qPre + (size_t)i * qStride + h * d;
      float c, s;
      if (cosT != nullptr) {
        c = cosT[(size_t)i * half + t];
        s = sinT[(size_t)i * half + t];
      } else {
        rope_cs(pos0 + i, invFreq[t], &c, &s);
      }
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
    out[h * d + t] = sa * inv;
    out[h * d + half + t] = sb * inv;
  }
}

// qf (heads, d) f32 = mean over rows i < m of head h of qPre row i (rows of qStride f32, before
// RoPE) rotated with row i of the tables cosT, sinT (>= m, d / 2) f32 (positions window + i).
// Grid (heads, ceil(d / 64)), 256 threads = 32 columns x 8 row groups whose partial sums are added
// in a fixed order.
extern "C" __global__ void ts_fingerprint(float* __restrict__ qf, const float* __restrict__ qPre, int qStride, int m,
                                          int heads, int d, const float* __restrict__ cosT,
                                          const float* __restrict__ sinT) {
  ts_mean_rotated(qf, qPre, qStride, m, d, cosT, sinT, nullptr, 0);
}

// score=rope: qs (heads, d) f32 = mean over rows i < m of qPre row i (rows of qStride f32, before
// RoPE) rotated at its real position pos0 + i (rope_cs with invFreq (d / 2) f32): the query the
// CPU's TokenSelect.realPositionQuery forms, scored against the rotated keys. Grid and block as
// ts_fingerprint.
extern "C" __global__ void ts_real_query(float* __restrict__ qs, const float* __restrict__ qPre, int qStride, int m,
                                         int heads, int d, const float* __restrict__ invFreq, int pos0) {
  ts_mean_rotated(qs, qPre, qStride, m, d, nullptr, nullptr, invFreq, pos0);
}

// The Selection Cache decision of one block (a multiple of 32 threads, at most 1024), from each
// thread's partial sums of qf.cachedQf, qf.qf and cachedQf.cachedQf over the elements it owns; every
// thread calls it. hit = possible && cosine >= threshold (the cosine in double as the CPU computes it,
// 0 for a zero vector); a hit counts in hits; on a miss with store set, qf becomes the cached
// fingerprint (each thread copies the elements i = threadIdx.x + k * blockDim.x, the ones it summed).
__device__ void ts_decide(double ab, double aa, double bb, int* __restrict__ hit, unsigned long long* __restrict__ hits,
                          float* __restrict__ cachedQf, const float* __restrict__ qf, int n, int possible, int store,
                          double threshold) {
  __shared__ double red[3][32];
  __shared__ int decided;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (possible) {  // uniform across the block: every lane shuffles
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
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int h = 0;
    if (possible) {
      double sab = 0, saa = 0, sbb = 0;
      for (int w = 0; w < nw; w++) {
        sab += red[0][w];
        saa += red[1][w];
        sbb += red[2][w];
      }
      double cs = (saa == 0 || sbb == 0) ? 0.0 : fmax(-1.0, fmin(1.0, sab / sqrt(saa * sbb)));
      h = cs >= threshold ? 1 : 0;
    }
    decided = h;
    *hit = h;
    if (h) *hits += 1ull;
  }
  __syncthreads();
  if (!decided && store) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) cachedQf[i] = qf[i];
  }
}

// Selection Cache decision for a fingerprint already in qf (the multi-row path); see ts_decide.
// `possible` is the host's knowledge that the cached top-k has this call's count.
extern "C" __global__ void ts_cache_check(int* __restrict__ hit, unsigned long long* __restrict__ hits,
                                          float* __restrict__ cachedQf, const float* __restrict__ qf, int n,
                                          int possible, int store, double threshold) {
  double ab = 0, aa = 0, bb = 0;
  if (possible) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      double x = qf[i], y = cachedQf[i];
      ab += x * y;
      aa += x * x;
      bb += y * y;
    }
  }
  ts_decide(ab, aa, bb, hit, hits, cachedQf, qf, n, possible, store, threshold);
}

// One decode row (m = 1) in ONE launch: what ts_fingerprint, ts_cache_check and rope_rows do for it.
// qf (heads, d) f32 = qPre (heads * d f32, before RoPE) rotated with row 0 of fpCos, fpSin (d / 2)
// f32 (position window); the cache decision and store of ts_decide (each thread sums the elements
// it computed, in the order ts_cache_check's threads read them, so the same decision); and, when
// qRot is non-null, qRot (heads, d) bf16 = qPre rotated at position qPos with row qPos of listCos,
// listSin (>= qPos + 1, d / 2) f32 (rope_table: rope_cs of positions 0..), the list-index query that
// list_decode reads; and, when qs is non-null (score=rope), qs (heads, d) f32 = qPre rotated at its
// real position sPos in fp32 (rope_cs with invFreq (d / 2) f32, as ts_real_query with m = 1).
// One block of TSF_THREADS threads.
#define TSF_THREADS 256
extern "C" __global__ void __launch_bounds__(TSF_THREADS)
    ts_decode_front(float* __restrict__ qf, int* __restrict__ hit, unsigned long long* __restrict__ hits,
                    float* __restrict__ cachedQf, bf16* __restrict__ qRot, const float* __restrict__ qPre,
                    const float* __restrict__ fpCos, const float* __restrict__ fpSin,
                    const float* __restrict__ listCos, const float* __restrict__ listSin, int heads, int d, int qPos,
                    int possible, int store, double threshold, float* __restrict__ qs,
                    const float* __restrict__ invFreq, int sPos) {
  int half = d / 2, n = heads * d;
  double ab = 0, aa = 0, bb = 0;
  // element i of the fingerprint is computed, stored and (cache check) read by the same thread
  for (int i = threadIdx.x; i < n; i += TSF_THREADS) {
    int h = i / d, col = i - h * d, t = col < half ? col : col - half;
    const float* src = qPre + (size_t)h * d;
    float c = fpCos[t], s = fpSin[t], x1 = src[t], x2 = src[half + t];
    float v = col < half ? x1 * c - x2 * s : x2 * c + x1 * s;
    qf[i] = v;
    if (possible) {
      double x = v, y = cachedQf[i];
      ab += x * y;
      aa += x * x;
      bb += y * y;
    }
  }
  ts_decide(ab, aa, bb, hit, hits, cachedQf, qf, n, possible, store, threshold);
  if (qRot != nullptr) {  // as rope_rows at pos qPos (the table holds rope_cs(qPos, invFreq[i]))
    const float* c = listCos + (size_t)qPos * half;
    const float* s = listSin + (size_t)qPos * half;
    for (int t = threadIdx.x; t < heads * half; t += TSF_THREADS) {
      int h = t / half, i = t - h * half;
      float x1 = qPre[h * d + i], x2 = qPre[h * d + half + i];
      qRot[h * d + i] = f2bf(x1 * c[i] - x2 * s[i]);
      qRot[h * d + half + i] = f2bf(x2 * c[i] + x1 * s[i]);
    }
  }
  if (qs != nullptr) {  // uniform; written whether or not the cache hits (the scoring skips it on a hit)
    __shared__ float sCos[128], sSin[128];  // d <= 256: the angles of sPos, once for all heads
    for (int i = threadIdx.x; i < half; i += TSF_THREADS) rope_cs(sPos, invFreq[i], &sCos[i], &sSin[i]);
    __syncthreads();
    for (int t = threadIdx.x; t < heads * half; t += TSF_THREADS) {
      int h = t / half, i = t - h * half;
      float c = sCos[i], s = sSin[i], x1 = qPre[h * d + i], x2 = qPre[h * d + half + i];
      qs[h * d + i] = x1 * c - x2 * s;
      qs[h * d + half + i] = x2 * c + x1 * s;
    }
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

// Top-k and the lists: ts_topk.cu (one launch, ts_topk_lists).

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
