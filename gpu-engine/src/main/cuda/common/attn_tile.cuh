// The device pieces the attention kernels share (decode_attention.cu, list_decode.cu, prefill_attention.cu,
// tsa.cu, split_attention.cu, list_attention.cu), one copy each so a fix lands everywhere. All forceinline
// with compile-time sizes and arrays by reference: after inlining each kernel compiles to what it did when
// the code was written out in place (same arithmetic in the same order, same registers).
//
// Tensor-core tiles: one warp holds 16 query rows; mma accumulator layout: thread (g = lane >> 2,
// qd = lane & 3) holds rows g (e < 2) and g + 8 (e >= 2) at column j * 8 + qd * 2 + (e & 1). Scores are
// in log2 units (exp2f); mRow/lRow are the running max and sum of the thread's two rows.
#pragma once
#include "common.cuh"

// An empty online softmax: output 0, running max -inf, running sum 0.
template <int D>
__device__ __forceinline__ void tile_init(float (&o)[D / 8][4], float (&mRow)[2], float (&lRow)[2]) {
#pragma unroll
  for (int i = 0; i < D / 8; i++)
#pragma unroll
    for (int e = 0; e < 4; e++) o[i][e] = 0.f;
  mRow[0] = mRow[1] = -INFINITY;
  lRow[0] = lRow[1] = 0.f;
}

// qf = the A fragments of query rows [row0, row0 + 16) (D columns) of sQ, rows LD elements apart, in shared memory.
template <int D, int LD>
__device__ __forceinline__ void tile_q_frags(unsigned (&qf)[D / 16][4], const bf16* sQ, int lane, int row0 = 0) {
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++)
    ldmatrix_x4(qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], sQ + (row0 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);
}

// s (16 rows x TK keys) = Q K^T; k = the key tile (TK, LD) bf16 in shared memory.
template <int TK, int D, int LD>
__device__ __forceinline__ void tile_qk(float (&s)[TK / 8][4], const unsigned (&qf)[D / 16][4], const bf16* k,
                                        int lane) {
#pragma unroll
  for (int j = 0; j < TK / 8; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) s[j][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
    for (int np = 0; np < TK / 16; np++) {
      unsigned b0, b1, b2, b3;
      ldmatrix_x4(b0, b1, b2, b3, k + (np * 16 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 + ((lane >> 3) & 1) * 8);
      mma_bf16(s[2 * np], qf[kk], b0, b1);
      mma_bf16(s[2 * np + 1], qf[kk], b2, b3);
    }
}

// The online-softmax step of one tile: s[j][e] becomes logit(j, e, s[j][e]) (the caller's scale, bias and
// mask; -inf hides a key), the rows' running max moves to the tile's, the running sum and the output o are
// rescaled to it, and s becomes exp2(logit - max) (added to lRow), ready for tile_pv.
template <int TK, int D, typename Logit>
__device__ __forceinline__ void tile_softmax(float (&s)[TK / 8][4], float (&o)[D / 8][4], float (&mRow)[2],
                                             float (&lRow)[2], Logit logit) {
  float mNew[2] = {mRow[0], mRow[1]};
#pragma unroll
  for (int j = 0; j < TK / 8; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      float x = logit(j, e, s[j][e]);
      s[j][e] = x;
      mNew[e >> 1] = fmaxf(mNew[e >> 1], x);
    }
  float alpha[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    mNew[r] = fmaxf(mNew[r], __shfl_xor_sync(0xffffffffu, mNew[r], 1));
    mNew[r] = fmaxf(mNew[r], __shfl_xor_sync(0xffffffffu, mNew[r], 2));
    float mUse = mNew[r] == -INFINITY ? 0.f : mNew[r];
    alpha[r] = exp2f(mRow[r] - mUse);  // exp2(-inf) = 0 on the first visible tile
    mRow[r] = mNew[r];
    lRow[r] *= alpha[r];
  }
  float mu0 = mRow[0] == -INFINITY ? 0.f : mRow[0], mu1 = mRow[1] == -INFINITY ? 0.f : mRow[1];
#pragma unroll
  for (int j = 0; j < TK / 8; j++) {
    s[j][0] = exp2f(s[j][0] - mu0);
    s[j][1] = exp2f(s[j][1] - mu0);
    s[j][2] = exp2f(s[j][2] - mu1);
    s[j][3] = exp2f(s[j][3] - mu1);
    lRow[0] += s[j][0] + s[j][1];
    lRow[1] += s[j][2] + s[j][3];
  }
#pragma unroll
  for (int d = 0; d < D / 8; d++) {
    o[d][0] *= alpha[0];
    o[d][1] *= alpha[0];
    o[d][2] *= alpha[1];
    o[d][3] *= alpha[1];
  }
}

// o += P V: P re-packed from the probabilities s as bf16 A fragments; v = the value tile (TK, LD) bf16.
template <int TK, int D, int LD>
__device__ __forceinline__ void tile_pv(float (&o)[D / 8][4], const float (&s)[TK / 8][4], const bf16* v, int lane) {
#pragma unroll
  for (int j = 0; j < TK / 16; j++) {
    unsigned pa[4] = {pack_bf16(s[2 * j][0], s[2 * j][1]), pack_bf16(s[2 * j][2], s[2 * j][3]),
                      pack_bf16(s[2 * j + 1][0], s[2 * j + 1][1]), pack_bf16(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; dp++) {
      unsigned b0, b1, b2, b3;
      ldmatrix_x4_trans(b0, b1, b2, b3, v + (j * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dp * 16 + (lane >> 4) * 8);
      mma_bf16(o[2 * dp], pa, b0, b1);
      mma_bf16(o[2 * dp + 1], pa, b2, b3);
    }
  }
}

// The rows' sums over the four threads (qd) that hold their columns.
__device__ __forceinline__ void tile_row_sums(float (&lRow)[2]) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    lRow[r] += __shfl_xor_sync(0xffffffffu, lRow[r], 1);
    lRow[r] += __shfl_xor_sync(0xffffffffu, lRow[r], 2);
  }
}

// Merges the WARPS warps' online softmaxes of the same 16 rows (each warp saw other keys of the split)
// through shared memory and writes the split's partials in attn_split's format: partO unnormalised, partML
// (max in natural-log units, sum); rows r < G at base + r * splits. sO: (WARPS, 16, SO) f32, of which only
// the G real rows are written (float2 stores; SO = D + 8 makes them conflict-free); sML: (2, WARPS, 16) f32,
// the rows' max then sum. Both may reuse buffers the warps were reading: the leading barrier waits until every
// warp is done with them. Every thread calls it.
template <int D, int WARPS, int SO>
__device__ __forceinline__ void tile_merge_warps_at(float* sO, float* sML, const float (&o)[D / 8][4],
                                                    const float (&mRow)[2], const float (&lRow)[2],
                                                    float* __restrict__ partO, float* __restrict__ partML,
                                                    size_t base, int G, int splits) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, qd = lane & 3;
  float* sM = sML;
  float* sL = sML + WARPS * 16;
  __syncthreads();
  if (qd == 0) {
    sM[warp * 16 + g] = mRow[0];
    sM[warp * 16 + g + 8] = mRow[1];
    sL[warp * 16 + g] = lRow[0];
    sL[warp * 16 + g + 8] = lRow[1];
  }
#pragma unroll
  for (int d = 0; d < D / 8; d++) {
    const int col = d * 8 + qd * 2;
    if (g < G) *reinterpret_cast<float2*>(sO + (warp * 16 + g) * SO + col) = make_float2(o[d][0], o[d][1]);
    if (g + 8 < G) *reinterpret_cast<float2*>(sO + (warp * 16 + g + 8) * SO + col) = make_float2(o[d][2], o[d][3]);
  }
  __syncthreads();
  for (int idx = tid; idx < G * D; idx += WARPS * 32) {
    const int r = idx / D, d = idx % D;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < WARPS; w++) M = fmaxf(M, sM[w * 16 + r]);
    float acc = 0.f, L = 0.f;
    if (M != -INFINITY) {
#pragma unroll
      for (int w = 0; w < WARPS; w++) {
        const float mw = sM[w * 16 + r];
        const float f = mw == -INFINITY ? 0.f : exp2f(mw - M);
        acc += sO[(w * 16 + r) * SO + d] * f;
        L += sL[w * 16 + r] * f;
      }
    }
    const size_t at = base + (size_t)r * splits;
    partO[at * D + d] = acc;
    if (d == 0) {
      partML[at * 2] = M == -INFINITY ? -INFINITY : M * 0.6931471805599453f;  // log2 units -> natural
      partML[at * 2 + 1] = L;
    }
  }
}

// The same with smem = WARPS * (16 * D + 32) floats: (WARPS, 16, D) rows, then the max and sum.
template <int D, int WARPS>
__device__ __forceinline__ void tile_merge_warps(void* smem, const float (&o)[D / 8][4], const float (&mRow)[2],
                                                 const float (&lRow)[2], float* __restrict__ partO,
                                                 float* __restrict__ partML, size_t base, int G, int splits) {
  float* sO = reinterpret_cast<float*>(smem);
  tile_merge_warps_at<D, WARPS, D>(sO, sO + WARPS * 16 * D, o, mRow, lRow, partO, partML, base, G, splits);
}

// ---- CUDA-core split kernels (split_attention.cu, list_attention.cu): TPK threads per key, 8 dims each.

// f = the 8 bf16 of raw as f32.
__device__ __forceinline__ void unpack8(const uint4& raw, float (&f)[8]) {
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int j = 0; j < 4; j++) {
    float2 v = __bfloat1622float2(p[j]);
    f[2 * j] = v.x;
    f[2 * j + 1] = v.y;
  }
}

// q . k over the key's TPK threads (a power of two dividing 32); every one of them gets the sum.
__device__ __forceinline__ float split_dot(const float (&q)[8], const float (&k)[8], int TPK) {
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 8; j++) s = fmaf(q[j], k[j], s);
  for (int o = TPK / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

template <int MAXG>
__device__ __forceinline__ void split_zero(float (&acc)[MAXG][8]) {
#pragma unroll
  for (int g = 0; g < MAXG; g++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[g][j] = 0.f;
}

// acc[g] += p_g * v for the heads g < G, p_g = the probability of the key at sc[g * chunk] (G, chunk).
template <int MAXG>
__device__ __forceinline__ void split_pv(float (&acc)[MAXG][8], const float* sc, int chunk, int G, const float (&v)[8]) {
#pragma unroll
  for (int g = 0; g < MAXG; g++) {
    if (g < G) {
      float pr = sc[g * chunk];
#pragma unroll
      for (int j = 0; j < 8; j++) acc[g][j] = fmaf(pr, v[j], acc[g][j]);
    }
  }
}

// Per head g < G: max m and sum l of exp(sc[g] - m) over the nk scores of sc (G, chunk), which become
// exp(s - m); (m, l) to stat[g]. SAFE: an all -inf head (masked by bias) gets probabilities 0, not NaN.
template <int THREADS, bool SAFE, int MAXG>
__device__ __forceinline__ void split_softmax(float* sc, int chunk, int nk, int G, float* red, float (&stat)[MAXG][2]) {
  const int tid = threadIdx.x;
  for (int g = 0; g < G; g++) {
    float m = -INFINITY;
    for (int i = tid; i < nk; i += THREADS) m = fmaxf(m, sc[g * chunk + i]);
    m = block_max(m, red);
    const float mUse = SAFE && m == -INFINITY ? 0.f : m;
    float l = 0.f;
    for (int i = tid; i < nk; i += THREADS) {
      float e = __expf(sc[g * chunk + i] - mUse);
      sc[g * chunk + i] = e;
      l += e;
    }
    l = block_sum(l, red);
    if (tid == 0) {
      stat[g][0] = m;
      stat[g][1] = l;
    }
  }
  __syncthreads();
}

// Sums the KPP key slots' P V accumulators acc (MAXG, 8) of each head g < G through red (KPP * D floats) and
// writes the split's partials: partO (D) and partML (max, sum from stat) of head g at base + g * splits.
// G is block-uniform: the barriers are reached by every thread or none.
template <int THREADS, int MAXG>
__device__ __forceinline__ void split_store(const float (&acc)[MAXG][8], float* red, const float (&stat)[MAXG][2],
                                            float* __restrict__ partO, float* __restrict__ partML, size_t base,
                                            int G, int splits, int D, int KPP, int kslot, int d0) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int g = 0; g < MAXG; g++) {
    if (g < G) {
      __syncthreads();
#pragma unroll
      for (int j = 0; j < 8; j++) red[kslot * D + d0 + j] = acc[g][j];
      __syncthreads();
      for (int d = tid; d < D; d += THREADS) {
        float s = 0.f;
        for (int r = 0; r < KPP; r++) s += red[r * D + d];
        partO[(base + (size_t)g * splits) * D + d] = s;
      }
      if (tid == 0) {
        partML[(base + (size_t)g * splits) * 2] = stat[g][0];
        partML[(base + (size_t)g * splits) * 2 + 1] = stat[g][1];
      }
    }
  }
}
