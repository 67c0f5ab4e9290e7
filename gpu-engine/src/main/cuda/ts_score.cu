// TokenSelect scoring on tensor cores (issue 5 §4): the vote logits voteScale * qf_h . k of every
// candidate key, for all query heads of a KV head at once, plus per-split softmax statistics (the
// soft vote over them: ts_votes.cu). CPU twin: attention/TokenSelect.score. Launch wrappers: io.longsieve.cuda.SelectKernels.
//
// Why tensor cores: the scoring is a (group x D) by (D x keys) product per KV head; with the keys
// read once per KV head the FMAs are nothing next to the bytes, but a CUDA-core version spends its
// time in shuffles and conversions and reaches only a quarter of the copy bandwidth. Here one
// m16n8k16 mma takes 8 keys x 16 dims for all (<= 8) heads of the group.
//
// fp32 accuracy from bf16 mma: the query is split into hi = bf16(q) and lo = bf16(q - hi); rows
// 0..7 of the A tile hold the heads' hi parts and rows 8..15 their lo parts, so one mma gives both
// and the logit is row j + row j + 8 of the same thread (error ~2^-17 |q||k| instead of bf16's 2^-9).
// Keys are bf16 (exact); the int4 copy (small integers, exact in bf16) is scored by ts_score_int4.cu,
// which reuses this file's layout helpers with the mma's roles swapped.
//
// No shared memory for the keys: a lane loads its own part of a key straight into the registers of
// the mma's B fragment. The dot product does not care in which order the dims are summed, so the
// dims are permuted to make the loads wide and coalesced (4 lanes read 64 contiguous bytes of one
// key) and the query fragments are gathered with the same permutation (ts_dim). Every warp keeps
// U groups of 8 keys in flight; 4 warps per block, about 4 blocks per multiprocessor.
#include "common.cuh"

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

// Scoring, grid (nKv, splits), TSS_WARPS * 32 threads: block (g, split) reads the keys of KV head g
// for candidates [split * chunk, +chunk) once and scores them for all `group` query heads of g:
// logits (heads, cands) f32 = voteScale * qf_h . k(sinks + c); partMl (heads, splits, 2) f32 the
// split's softmax (max, sum) per head, from the paged kPre (pageSize a power of two). The int4
// copy has its own kernel (ts_score_int4.cu), which shares the layout helpers above.
template <int D>
__device__ __forceinline__ void tss_score(float* __restrict__ logits, float* __restrict__ partMl,
                                          const int* __restrict__ hit, const bf16* __restrict__ kPre,
                                          const int* __restrict__ pageTable, const float* __restrict__ qf, int heads,
                                          int nKv, int pageSize, int sinks, int cands, int chunk, int gqaMod,
                                          float voteScale) {
  if (*hit) return;
  constexpr bool INT4 = false;  // tss_dim / TssLayout's bf16 case
  using Lay = TssLayout<D, INT4>;
  constexpr int W = Lay::W, U = Lay::U, KS = D / 16;
  const int g = blockIdx.x, split = blockIdx.y, splits = gridDim.y, group = heads / nKv;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r = lane >> 2, t = lane & 3;  // r: A/C row (head r) and B column (key r of a group); t: quad lane
  const bool rowOn = r < group;
  const int h = tss_head(g, rowOn ? r : 0, group, nKv, gqaMod);

  // A fragments: rows r (hi) and r + 8 (lo) of head r at the permuted dims; zero rows past the group
  unsigned a[KS][4];
  {
    const float* q = qf + (size_t)h * D;
#pragma unroll
    for (int kk = 0; kk < KS; kk++)
#pragma unroll
      for (int p = 0; p < 2; p++) {  // p 0: elements 0, 1 (a0, a1); p 1: elements 2, 3 (a2, a3)
        float x0 = rowOn ? q[tss_dim<D, INT4>(kk, 2 * p, t)] : 0.f;
        float x1 = rowOn ? q[tss_dim<D, INT4>(kk, 2 * p + 1, t)] : 0.f;
        float h0 = bf2f(f2bf(x0)), h1 = bf2f(f2bf(x1));
        a[kk][2 * p] = pack_bf16(h0, h1);
        a[kk][2 * p + 1] = pack_bf16(x0 - h0, x1 - h1);
      }
  }

  const int lo = sinks + split * chunk, hi = sinks + min(cands, split * chunk + chunk);  // slots of the split
  const int s0 = lo & ~7;                         // groups of 8 aligned slots: never across a page
  const int nGroups = lo < hi ? (hi - s0 + 7) / 8 : 0;
  const int nIt = (nGroups + U - 1) / U;
  // the split's page-table entries in shared memory: a key load then waits on one global round
  // trip, not two (a split longer than TSS_PAGES pages reads the table from global memory)
  __shared__ int sPage[TSS_PAGES];
  const int pShift = __ffs(pageSize) - 1;  // pageSize a power of two (SelectKernels.score checks)
  const int p0 = s0 >> pShift;
  const int nPages = lo >= hi ? 0 : ((hi - 1) >> pShift) - p0 + 1;
  const bool staged = nPages <= TSS_PAGES;
  if (staged)
    for (int i = threadIdx.x; i < nPages; i += TSS_WARPS * 32) sPage[i] = pageTable[p0 + i];
  __syncthreads();
  float m[1] = {-INFINITY}, l[1] = {0.f};  // head r's statistics over the keys this lane accounts
  for (int it = warp; it < nIt; it += TSS_WARPS) {  // warp-uniform: the mma needs the whole warp
    unsigned kw[U][Lay::WORDS];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int base = s0 + (it * U + u) * 8, slot = base + r;
      const bool ok = slot >= lo && slot < hi;
      size_t off = 0;
      if (ok) {
        const int page = staged ? sPage[(slot >> pShift) - p0] : pageTable[slot >> pShift];
        off = (((size_t)page * nKv + g) * pageSize + (slot & (pageSize - 1))) * D;  // kv_offset's layout
      }
      const unsigned char* row = reinterpret_cast<const unsigned char*>(kPre + off);
#pragma unroll
      for (int i = 0; i < Lay::CHUNKS; i++) {
        const int byteOff = (i * 4 * W + t * W) * 2;
        tss_load<Lay::CB>(&kw[u][i * Lay::WPC], row + byteOff, ok);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int kk = 0; kk < KS; kk++) mma_bf16(c, a[kk], kw[u][2 * kk], kw[u][2 * kk + 1]);
      // c[e] (row r, key 2t + e) + c[2 + e] (row r + 8): head r's logit of slot base + 2t + e
      const int base = s0 + (it * U + u) * 8;
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int se = base + 2 * t + e;
        if (rowOn && se >= lo && se < hi) {
          float dot = c[e] + c[2 + e];
          float s = voteScale * dot;
          logits[(size_t)h * cands + (se - sinks)] = s;
          tss_online(m[0], l[0], s);
        }
      }
    }
  }
  // the quad of row r (lanes 1, 2 apart) holds head r's statistics: merge it, then the warps
  tss_split_stats<1, 1, 2>(partMl, m, l, t == 0, r, 0, g, group, nKv, gqaMod, split, splits);
}

#define TS_SCORE(D)                                                                                               \
  extern "C" __global__ void __launch_bounds__(TSS_WARPS * 32, 4)                                                 \
      ts_score_d##D(float* logits, float* partMl, const int* hit, const bf16* kPre, const int* pageTable,         \
                    const float* qf, int heads, int nKv, int pageSize, int sinks, int cands, int chunk, int gqaMod, \
                    float voteScale) {                                                                            \
    tss_score<D>(logits, partMl, hit, kPre, pageTable, qf, heads, nKv, pageSize, sinks, cands, chunk, gqaMod,    \
                 voteScale);                                                                                      \
  }
TS_SCORE(16)
TS_SCORE(32)
TS_SCORE(64)
TS_SCORE(128)
TS_SCORE(256)
