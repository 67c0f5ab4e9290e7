// TokenSelect on the GPU (issue 5 §1): fingerprint, device-side Selection Cache check, scoring of the
// pre-RoPE keys (bf16 or the policy's int4 copy; score=rope: the rotated keys against the query at
// its real positions, ts_real_query) with fused softmax statistics, the soft vote,
// max-pool, radix top-k and the attended lists. CPU twin: cpu/policy/TokenSelect.java. Every kernel
// after the cache check (ts_cache_check, or ts_decode_front for one decode row) reads the hit flag
// and returns at once on a hit (the cached top-k is used).
// Launch wrappers: io.longsieve.cuda.kernels.SelectKernels.
#include "../common/common.cuh"
#include "../common/step_sizes.cuh"

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
  if (!decided && store) {  // the elements this thread wrote (its own writes: visible to it), 8 loads in flight
#pragma unroll 8
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
// Latency, not work: the whole front is ~4K elements, but it sits on every decode step's critical
// path once per layer. So a thread issues the loads of TSF_BATCH of its elements together (one L2
// round trip per batch, not one per element; Llama-3.1-8B's 4096 elements are one batch of the block)
// and writes the three outputs of an element from the same registers (qPre is read once).
#define TSF_THREADS 512
#define TSF_BATCH 8
extern "C" __global__ void __launch_bounds__(TSF_THREADS)
    ts_decode_front(float* __restrict__ qf, int* __restrict__ hit, unsigned long long* __restrict__ hits,
                    float* __restrict__ cachedQf, bf16* __restrict__ qRot, const float* __restrict__ qPre,
                    const float* __restrict__ fpCos, const float* __restrict__ fpSin,
                    const float* __restrict__ listCos, const float* __restrict__ listSin, int heads, int d, int qPos,
                    int possible, int store, double threshold, float* __restrict__ qs,
                    const float* __restrict__ invFreq, int sPos, const int* __restrict__ step) {
  if (qs != nullptr) sPos = step_size(step, STEP_POS, sPos);
  const int half = d / 2, n = heads * d;
  __shared__ float sCos[128], sSin[128];  // score=rope: the angles of sPos, once for all heads (d <= 256)
  if (qs != nullptr) {                    // uniform
    for (int i = threadIdx.x; i < half; i += TSF_THREADS) rope_cs(sPos, invFreq[i], &sCos[i], &sSin[i]);
    __syncthreads();
  }
  const float* lc = qRot != nullptr ? listCos + (size_t)qPos * half : nullptr;  // as rope_rows at pos qPos
  const float* ls = qRot != nullptr ? listSin + (size_t)qPos * half : nullptr;
  double ab = 0, aa = 0, bb = 0;
  // element i = threadIdx.x + k * TSF_THREADS is computed, stored and (cache check) summed by this thread, k ascending
  for (int i0 = threadIdx.x; i0 < n; i0 += TSF_BATCH * TSF_THREADS) {
    float x1[TSF_BATCH], x2[TSF_BATCH], c[TSF_BATCH], s[TSF_BATCH], y[TSF_BATCH], rc[TSF_BATCH], rs[TSF_BATCH];
#pragma unroll
    for (int u = 0; u < TSF_BATCH; u++) {  // every load of the batch first
      const int i = i0 + u * TSF_THREADS, h = i / d, col = i - h * d, t = col < half ? col : col - half;
      const bool in = i < n;
      x1[u] = in ? qPre[(size_t)h * d + t] : 0.f;
      x2[u] = in ? qPre[(size_t)h * d + half + t] : 0.f;
      c[u] = in ? fpCos[t] : 0.f;
      s[u] = in ? fpSin[t] : 0.f;
      y[u] = in && possible ? cachedQf[i] : 0.f;
      rc[u] = in && lc != nullptr ? lc[t] : 0.f;
      rs[u] = in && ls != nullptr ? ls[t] : 0.f;
    }
#pragma unroll
    for (int u = 0; u < TSF_BATCH; u++) {
      const int i = i0 + u * TSF_THREADS, h = i / d, col = i - h * d, t = col < half ? col : col - half;
      if (i >= n) break;
      const bool first = col < half;  // rotate-half: element t of the pair (t, t + half), or its partner
      const float v = first ? x1[u] * c[u] - x2[u] * s[u] : x2[u] * c[u] + x1[u] * s[u];
      qf[i] = v;
      if (possible) {
        const double x = v, yy = y[u];
        ab += x * yy;
        aa += x * x;
        bb += yy * yy;
      }
      if (qRot != nullptr) qRot[i] = f2bf(first ? x1[u] * rc[u] - x2[u] * rs[u] : x2[u] * rc[u] + x1[u] * rs[u]);
      if (qs != nullptr)  // written whether or not the cache hits (the scoring skips it on a hit)
        qs[i] = first ? x1[u] * sCos[t] - x2[u] * sSin[t] : x2[u] * sCos[t] + x1[u] * sSin[t];
    }
  }
  ts_decide(ab, aa, bb, hit, hits, cachedQf, qf, n, possible, store, threshold);
}

// Scoring (ts_score_d*, ts_score_int4_d*): ts_score.cu and ts_score_int4.cu; the soft vote (ts_votes): ts_votes.cu.

// pooled (lists, len) = max_pool1d over each list of votes (lists, n) with kernel, stride 1, padding
// (kernel - 1) / 2 of -inf (torch; CPU TokenSelect.maxPool); len = n + 2 pad - kernel + 1. Grid (x, lists).
extern "C" __global__ void ts_maxpool(float* __restrict__ pooled, const float* __restrict__ votes,
                                      const int* __restrict__ hit, int n, int len, int kernel,
                                      const int* __restrict__ step) {
  n = step_size(step, STEP_CANDS, n);
  len = step_size(step, STEP_N, len);
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
