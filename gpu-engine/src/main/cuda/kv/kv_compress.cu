// KV compression after prefill (SelKV, SnapKV, StreamingLLM eviction) on the device. CPU twins:
// cpu/policy/ObservationWindow, SelKv, SnapKv, StreamingLlm.Eviction, TopK and cpu/kernels/KvCache.retain.
// Launch wrappers: io.longsieve.cuda.kernels.KvCompressKernels. One layer at a time:
//   kvc_obs_store / kvc_obs_rope: the observation window (last W prompt queries, a ring per layer)
//       and its rows rotated at their positions;
//   kvc_obs_scores (pass 0: per-tile softmax stats, pass 1: probabilities summed per head) +
//       kvc_obs_stats: attn[h, j] = sum over window rows of softmax(q_r . k_j * scale + bias[j, h])[j];
//   kvc_vnorm, kvc_mul_slice, kvc_avg_pool, kvc_group_sum, kvc_union_mask: scores and votes;
//   kvc_topk_flags: deterministic top-k per row (radix select; ties to the lower index, as TopK);
//   kvc_lists: keep / drop lists (ascending) per KV head from the flags;
//   kvc_bucket_best, kvc_route: SelKV's routing of each dropped token to a kept token of its position bucket;
//   kvc_merge_acc, kvc_merge_apply: the value-cosine gate, the attention-weighted merge and the logit bias
//       alpha * log R per query head;
//   kvc_gather, kvc_scatter, kvc_zero_bias: compaction through scratch (in-place moves would race).
// Stages in four files: observation scores and votes here, top-k and lists in kv_select.cu, routing and
// merge in kv_merge.cu, compaction in kv_compact.cu.
#include "kv_tile.cuh"

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
      if (j <= slot && j < n) s = acc[a][b] * scale + (bias ? bias[(size_t)j * heads + g * G + i / cnt] : 0.f);
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
