// TokenSelect on the GPU (issue 5 §1): fingerprint, device-side Selection Cache check, scoring of the
// pre-RoPE keys (bf16 or the policy's int4 copy) with fused softmax statistics, the soft vote,
// max-pool, radix top-k and the attended lists. CPU twin: attention/TokenSelect.java. Every kernel
// after the cache check reads the hit flag and returns at once on a hit (the cached top-k is used).
// Launch wrappers: io.longsieve.cuda.SelectKernels.
#include "common.cuh"

#define TS_GMAX 8  // query heads per KV head the scoring kernel keeps in registers

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

// Online-softmax statistics: (m, l) absorbs (m2, l2).
__device__ __forceinline__ void ts_ml_combine(float& m, float& l, float m2, float l2) {
  float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;
  l = l * expf(m - mx) + l2 * expf(m2 - mx);
  m = mx;
}

// Online softmax statistics absorbing one logit s (one exponential).
__device__ __forceinline__ void ts_online(float& m, float& l, float s) {
  if (s > m) {
    l = l * expf(m - s) + 1.f;
    m = s;
  } else {
    l += expf(s - m);
  }
}

// Query head j of KV head g's scoring group: g * group + j (gqa=div) or g + j * nKv (gqa=mod).
__device__ __forceinline__ int ts_head(int g, int j, int group, int nKv, int gqaMod) {
  return gqaMod ? g + j * nKv : g * group + j;
}

// Scoring, grid (nKv, splits), blockDim a multiple of 32: block (g, split) reads the keys of KV head
// g for candidates [split * chunk, +chunk) once and scores them for all `group` query heads of g:
// logits (heads, cands) f32 = voteScale * qf_h . k(sinks + c); partMl (heads, splits, 2) f32 the
// split's softmax (max, sum) per head. D/8 lanes share one key, 8 elements (16 bytes bf16 or 4
// bytes int4) each. INT4 reads kq (slots, nKv, D/2) packed nibbles (even element low) and ks
// (slots, nKv) f32 scales instead of kPre.
template <int D, bool INT4>
__device__ __forceinline__ void ts_score(float* __restrict__ logits, float* __restrict__ partMl,
                                         const int* __restrict__ hit, const bf16* __restrict__ kPre,
                                         const unsigned char* __restrict__ kq, const float* __restrict__ ks,
                                         const int* __restrict__ pageTable, const float* __restrict__ qf, int heads,
                                         int nKv, int pageSize, int sinks, int cands, int chunk, int gqaMod,
                                         float voteScale) {
  if (*hit) return;
  constexpr int L = D / 8, KPW = 32 / L;
  constexpr bool SPREAD = L >= TS_GMAX;  // a lane per query head of the group (head size >= 64)
  int g = blockIdx.x, split = blockIdx.y, splits = gridDim.y, group = heads / nKv;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int sub = lane / L, part = lane % L;
  float q[TS_GMAX][8], mx[TS_GMAX], sm[TS_GMAX];
#pragma unroll
  for (int j = 0; j < TS_GMAX; j++) {
    mx[j] = -INFINITY;
    sm[j] = 0.f;
    const float* src = qf + (size_t)ts_head(g, j < group ? j : 0, group, nKv, gqaMod) * D + part * 8;
#pragma unroll
    for (int e = 0; e < 8; e++) q[j][e] = j < group ? src[e] : 0.f;
  }
  int c0 = split * chunk, c1 = min(cands, c0 + chunk);
  // U keys per lane group in flight before any is used: one load at a time cannot cover the latency
  constexpr int U = INT4 ? 8 : 4;
  for (int b = c0 + warp * KPW * U; b < c1; b += nw * KPW * U) {  // uniform over the warp: shuffles below
    uint4 raw[U];
    float kscale[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      int c = b + u * KPW + sub, slot = sinks + c;
      raw[u] = make_uint4(0u, 0u, 0u, 0u);
      kscale[u] = 0.f;
      if (c < c1) {
        if (INT4) {
          raw[u].x = *reinterpret_cast<const unsigned*>(kq + ((size_t)slot * nKv + g) * (D / 2) + part * 4);
          kscale[u] = ks[(size_t)slot * nKv + g];
        } else {
          raw[u] = *reinterpret_cast<const uint4*>(kPre + kv_offset(pageTable, slot, g, nKv, pageSize, D) + part * 8);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      int c = b + u * KPW + sub;
      bool ok = c < c1;
      float kx[8];
      if (INT4) {
        unsigned w = raw[u].x;
#pragma unroll
        for (int e = 0; e < 8; e++) kx[e] = (float)(((int)(w << (28 - 4 * e))) >> 28);
      } else {
        const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&raw[u]);
#pragma unroll
        for (int e = 0; e < 4; e++) {
          float2 f = __bfloat1622float2(p[e]);
          kx[2 * e] = f.x;
          kx[2 * e + 1] = f.y;
        }
      }
      float mine = -INFINITY;  // SPREAD: the logit of query head `part`, which this lane accounts
#pragma unroll
      for (int j = 0; j < TS_GMAX; j++) {
        if (j >= group) break;  // group is uniform: no divergence
        float acc = 0.f;
#pragma unroll
        for (int e = 0; e < 8; e++) acc += q[j][e] * kx[e];
        // xor reduction: every lane of the key's group ends with the whole dot product
#pragma unroll
        for (int o = L / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        float s = voteScale * (INT4 ? kscale[u] * acc : acc);
        if (SPREAD) {
          if (j == part) mine = s;
        } else if (ok && part == 0) {
          logits[(size_t)ts_head(g, j, group, nKv, gqaMod) * cands + c] = s;
          ts_online(mx[j], sm[j], s);
        }
      }
      // lanes 0 .. group-1 of the key's group store and account one head each, in one predicated step
      if (SPREAD && ok && part < group) {
        logits[(size_t)ts_head(g, part, group, nKv, gqaMod) * cands + c] = mine;
        ts_online(mx[0], sm[0], mine);
      }
    }
  }
  __shared__ float sM[32][TS_GMAX], sL[32][TS_GMAX];
#pragma unroll
  for (int j = 0; j < TS_GMAX; j++) {
    // SPREAD: head j's statistics live in the lanes with part == j (slot 0 of their arrays)
    float m1 = SPREAD ? (part == j ? mx[0] : -INFINITY) : mx[j], l1 = SPREAD ? (part == j ? sm[0] : 0.f) : sm[j];
    for (int o = 16; o > 0; o >>= 1) {
      float m2 = __shfl_xor_sync(0xffffffffu, m1, o), l2 = __shfl_xor_sync(0xffffffffu, l1, o);
      ts_ml_combine(m1, l1, m2, l2);
    }
    if (lane == 0) {
      sM[warp][j] = m1;
      sL[warp][j] = l1;
    }
  }
  __syncthreads();
  if (threadIdx.x < group) {
    int j = threadIdx.x;
    float m = -INFINITY, l = 0.f;
    for (int w = 0; w < nw; w++) ts_ml_combine(m, l, sM[w][j], sL[w][j]);
    float* o = partMl + ((size_t)ts_head(g, j, group, nKv, gqaMod) * splits + split) * 2;
    o[0] = m;
    o[1] = l;
  }
}

#define TS_SCORE(D)                                                                                              \
  extern "C" __global__ void ts_score_d##D(float* logits, float* partMl, const int* hit, const bf16* kPre,      \
                                           const int* pageTable, const float* qf, int heads, int nKv,           \
                                           int pageSize, int sinks, int cands, int chunk, int gqaMod,           \
                                           float voteScale) {                                                   \
    ts_score<D, false>(logits, partMl, hit, kPre, nullptr, nullptr, pageTable, qf, heads, nKv, pageSize, sinks, \
                       cands, chunk, gqaMod, voteScale);                                                        \
  }                                                                                                             \
  extern "C" __global__ void ts_score_int4_d##D(float* logits, float* partMl, const int* hit,                  \
                                                const unsigned char* kq, const float* ks, const float* qf,      \
                                                int heads, int nKv, int sinks, int cands, int chunk, int gqaMod, \
                                                float voteScale) {                                              \
    ts_score<D, true>(logits, partMl, hit, nullptr, kq, ks, nullptr, qf, heads, nKv, 0, sinks, cands, chunk,    \
                      gqaMod, voteScale);                                                                       \
  }
TS_SCORE(16)
TS_SCORE(32)
TS_SCORE(64)
TS_SCORE(128)
TS_SCORE(256)

// Soft vote: votes (lists, cands) f32; list 0 sums all heads (heads=layer), list g the heads that
// score with KV head g (heads=kvhead), in increasing head order as the CPU does:
// votes[g][c] = sum_h exp(logit[h][c] - M_h) / L_h, (M_h, L_h) merged from the splits' partMl.
// Grid-stride over candidates; heads <= 256, blockDim a multiple of 32.
extern "C" __global__ void ts_votes(float* __restrict__ votes, const float* __restrict__ logits,
                                    const float* __restrict__ partMl, const int* __restrict__ hit, int heads,
                                    int nKv, int cands, int splits, int perKv, int gqaMod) {
  if (*hit) return;
  __shared__ float sM[256], sInv[256];
  // one warp per head merges its splits (lanes stride over them), so every block has them quickly
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int h = warp; h < heads; h += nw) {
    float m = -INFINITY, l = 0.f;
    for (int s = lane; s < splits; s += 32) {
      ts_ml_combine(m, l, partMl[((size_t)h * splits + s) * 2], partMl[((size_t)h * splits + s) * 2 + 1]);
    }
    for (int o = 16; o > 0; o >>= 1) {
      float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
      ts_ml_combine(m, l, m2, l2);
    }
    if (lane == 0) {
      sM[h] = m;
      sInv[h] = 1.f / l;
    }
  }
  __syncthreads();
  int group = heads / nKv;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cands; c += gridDim.x * blockDim.x) {
    if (!perKv) {
      float v = 0.f;
      for (int h = 0; h < heads; h++) v += expf(logits[(size_t)h * cands + c] - sM[h]) * sInv[h];
      votes[c] = v;
    } else {
      for (int g = 0; g < nKv; g++) {
        float v = 0.f;
        for (int j = 0; j < group; j++) {
          int h = ts_head(g, j, group, nKv, gqaMod);
          v += expf(logits[(size_t)h * cands + c] - sM[h]) * sInv[h];
        }
        votes[(size_t)g * cands + c] = v;
      }
    }
  }
}

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
