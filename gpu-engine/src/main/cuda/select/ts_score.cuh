// TokenSelect scoring's sizes and layout helpers, shared by the bf16 kernel (ts_score.cu) and the
// int4 one (ts_score_int4.cu): the head of a scoring group, the per-split softmax statistics, the
// permuted dim order of a key's loads (TssLayout, tss_dim) and the wide key loads (tss_load). Moved
// here unchanged from ts_score.cu so each kernel file compiles on its own.
#pragma once
#include "../common/common.cuh"

#define TSS_WARPS 4  // warps per scoring block (SelectKernels.SCORE_THREADS / 32)
#define TSS_GMAX 8   // query heads per KV head: rows 0..7 hi, 8..15 lo of the mma tile
#define TSS_PAGES 256  // page-table entries a block stages in shared memory (16K keys of 64)

// Query head j of KV head g's scoring group: g * group + j (gqa=div) or g + j * nKv (gqa=mod).
__device__ __forceinline__ int tss_head(int g, int j, int group, int nKv, int gqaMod) {
  return gqaMod ? g + j * nKv : g * group + j;
}

// Online-softmax statistics: (m, l) absorbs (m2, l2).
__device__ __forceinline__ void tss_ml_combine(float& m, float& l, float m2, float l2) {
  float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;
  l = l * expf(m - mx) + l2 * expf(m2 - mx);
  m = mx;
}

// The epilogue of both scoring kernels (tss_score, tsi_score in ts_score_int4.cu): partMl (heads,
// splits, 2) f32 at (head, split) = the split's softmax (max, sum) of each of the block's `group` heads.
// A lane's (m[nb], l[nb]) are head slot `slot + nb * slotStep`'s statistics over the keys it scored;
// the lanes OFF_LO, 2 OFF_LO, .. OFF_HI apart (xor) hold the same slot and are merged first, then one
// `writer` lane per slot and warp publishes the warp's, and the first `group` threads merge the warps
// in warp order. Every thread calls it (barrier).
template <int NB, int OFF_LO, int OFF_HI>
__device__ __forceinline__ void tss_split_stats(float* __restrict__ partMl, float (&m)[NB], float (&l)[NB],
                                                bool writer, int slot, int slotStep, int g, int group, int nKv,
                                                int gqaMod, int split, int splits) {
#pragma unroll
  for (int nb = 0; nb < NB; nb++)
#pragma unroll
    for (int o = OFF_LO; o <= OFF_HI; o <<= 1) {
      float m2 = __shfl_xor_sync(0xffffffffu, m[nb], o), l2 = __shfl_xor_sync(0xffffffffu, l[nb], o);
      tss_ml_combine(m[nb], l[nb], m2, l2);
    }
  __shared__ float sM[TSS_WARPS][TSS_GMAX], sL[TSS_WARPS][TSS_GMAX];
  const int warp = threadIdx.x >> 5;
  if (writer) {
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
      sM[warp][slot + nb * slotStep] = m[nb];
      sL[warp][slot + nb * slotStep] = l[nb];
    }
  }
  __syncthreads();
  if (threadIdx.x < group) {
    int j = threadIdx.x;
    float mm = -INFINITY, ll = 0.f;
    for (int w = 0; w < TSS_WARPS; w++) tss_ml_combine(mm, ll, sM[w][j], sL[w][j]);
    float* o = partMl + ((size_t)tss_head(g, j, group, nKv, gqaMod) * splits + split) * 2;
    o[0] = mm;
    o[1] = ll;
  }
}

// Online softmax statistics absorbing one logit s (one exponential).
__device__ __forceinline__ void tss_online(float& m, float& l, float s) {
  if (s > m) {
    l = l * expf(m - s) + 1.f;
    m = s;
  } else {
    l += expf(s - m);
  }
}

// Per-lane layout of one key (lane quad t = lane & 3 of the 4 lanes that hold key lane >> 2):
// chunks of W dims, chunk i of lane t = dims [i * 4W + t * W, +W). bf16: W = 8 (16 bytes), int4:
// W = 32 (16 bytes of nibbles), both capped at D / 4.
template <int D, bool INT4>
struct TssLayout {
  static constexpr int W = INT4 ? (D / 4 < 32 ? D / 4 : 32) : (D / 4 < 8 ? D / 4 : 8);
  static constexpr int CHUNKS = D / (4 * W);
  static constexpr int CB = INT4 ? W / 2 : W * 2;      // bytes per chunk: 2, 4, 8 or 16
  static constexpr int WPC = CB >= 4 ? CB / 4 : 1;     // 32-bit words per chunk (a 2-byte chunk: 1, spread)
  static constexpr int WORDS = CHUNKS * WPC;           // words per lane per key
  // bf16 kernel: groups of 8 keys in flight per warp, up to 64 words of key data per lane (32 where
  // the query fragments take 64 registers (D = 256)), at most 16 groups (ts_score_int4.cu: TsiLayout)
  static constexpr int KEY_WORDS = D > 128 ? 32 : 64;
  static constexpr int U = WORDS >= KEY_WORDS ? 1 : KEY_WORDS / WORDS > 16 ? 16 : KEY_WORDS / WORDS;
};

// Physical dim of element s (0: b0 low, 1: b0 high, 2: b1 low, 3: b1 high) of mma k-step kk for
// lane quad t. bf16: the lane's words in load order, k-step kk = words 2kk (b0), 2kk + 1 (b1).
// int4: word kk / 2, half h = kk & 1: b0 = nibbles (2h, 2h + 4), b1 = nibbles (2h + 1, 2h + 5)
// (see tsi_pair, ts_score_int4.cu); a 2-byte chunk (D = 16) is spread so its nibbles 0..3 sit at 0, 1, 4, 5.
// Mirrored in Java by TsScoreLayoutTest.
template <int D, bool INT4>
__device__ __forceinline__ int tss_dim(int kk, int s, int t) {
  using Lay = TssLayout<D, INT4>;
  constexpr int W = Lay::W;
  if (!INT4) {
    int e = 4 * kk + s;
    return (e / W) * 4 * W + t * W + e % W;
  }
  int h = kk & 1, wi = kk >> 1;
  int pos = 2 * h + (s & 1) * 4 + (s >> 1);
  if (W == 4) return t * 4 + (pos < 4 ? pos : pos - 2);
  constexpr int WPC = W >= 8 ? W / 8 : 1;  // words per chunk
  return (wi / WPC) * 4 * W + t * W + (wi % WPC) * 8 + pos;
}

// Loads one chunk of CB bytes from p into w (zeros when !ok). Streaming loads (evict-first in L1
// and L2): the keys are read once per step, and the 16 MB of logits this kernel writes should
// still be in L2 when ts_votes reads them.
template <int CB>
__device__ __forceinline__ void tss_load(unsigned* w, const unsigned char* p, bool ok) {
  if (CB == 16) {
    uint4 v = ok ? __ldcs(reinterpret_cast<const uint4*>(p)) : make_uint4(0u, 0u, 0u, 0u);
    w[0] = v.x;
    w[1] = v.y;
    w[2] = v.z;
    w[3] = v.w;
  } else if (CB == 8) {
    uint2 v = ok ? __ldcs(reinterpret_cast<const uint2*>(p)) : make_uint2(0u, 0u);
    w[0] = v.x;
    w[1] = v.y;
  } else if (CB == 4) {
    w[0] = ok ? __ldcs(reinterpret_cast<const unsigned*>(p)) : 0u;
  } else {  // 2 bytes = 4 nibbles: spread to nibble positions 0, 1, 4, 5
    unsigned x = ok ? (unsigned)__ldcs(reinterpret_cast<const unsigned short*>(p)) : 0u;
    w[0] = (x & 0xFFu) | ((x & 0xFF00u) << 8);
  }
}
