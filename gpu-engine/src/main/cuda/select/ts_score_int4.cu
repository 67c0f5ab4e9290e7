// TokenSelect scoring from the int4 key copy (index=int4, issue 5 §4): the logits and per-split
// softmax statistics of ts_score_d* (ts_score.cu), from kq (slots, nKv, D/2) packed nibbles (even
// element low) and ks (slots, nKv) f32 scales: logit = voteScale * (scale * (qf_h . q)) with q the
// signed nibbles. CPU twin: cpu/policy/TokenSelect.score with the int4 index. Launch wrapper:
// io.longsieve.cuda.kernels.SelectKernels.scoreInt4.
//
// Why a kernel of its own: an int4 key row is 64 bytes at D = 128, a quarter of a bf16 row, so the
// per-key work (unpacking, mma, logit store, softmax) must be a quarter as well to keep pace with
// the loads. The bf16 kernel's layout (A = the query heads, B = 8 keys) spends an mma and two
// logits per lane on 8 keys and wastes half the rows and lanes for 4-head groups, and its per-logit
// online softmax branches. Here the roles are swapped: A = 16 keys (rows), B = the heads' hi and lo
// query parts as columns (2j hi, 2j + 1 lo of head j, 4 heads per mma), so one mma scores 16 keys,
// and lane (r, t) gets head t's hi and lo parts of keys r and r + 8 in its own registers (c0 + c1,
// c2 + c3: no shuffle). The dims are permuted exactly as in ts_score.cu (tss_dim<D, true>): the
// mma's A and B elements of lane quad t sit at the same k indices as the bf16 kernel's B and A, so
// the same lane loads (tss_load) and the same query gather serve. Softmax statistics are updated
// once per iteration (the max of its logits first), with no divergent branch. Keys outside the
// split load a clamped in-split row (no predicated loads) and their logits are dropped.
// Mirrored in Java by TsScoreLayoutTest (int4 A/B/C mapping).
#include "../common/common.cuh"
#include "ts_score.cuh"  // TssLayout, tss_dim, tss_load, tss_head, tss_split_stats
#include "../common/step_sizes.cuh"

#define TSI_COLS 4  // query heads per mma: columns 2j (hi) and 2j + 1 (lo) of head j

// A/B register of int4 nibbles: the two nibbles at positions p and p + 4 of the raw word w
// (two's complement) as bf16x2 (p low). (u & 15) ^ 0x4308 = 0x4300 | (u ^ 8) = 128 + (q + 8) in
// bf16 exactly (ulp 1), minus 136 = q. One LOP3, a shift (p > 0) and one bf16x2 subtract.
__device__ __forceinline__ unsigned tsi_pair(unsigned w, int p) {
  unsigned x = ((w >> (4 * p)) & 0x000F000Fu) ^ 0x43084308u;
  const unsigned c136 = 0x43084308u;  // bf16x2 (136, 136)
  __nv_bfloat162 v = __hsub2(*reinterpret_cast<__nv_bfloat162*>(&x), *reinterpret_cast<const __nv_bfloat162*>(&c136));
  return *reinterpret_cast<unsigned*>(&v);
}

// Groups of 16 keys a warp keeps in flight: NB = 1 (group <= 4) up to 64 words of raw key data per
// lane (two keys of Lay::WORDS words a group), NB = 2 (a second column block of B) half of that;
// at most 8 groups (the scales and logits of a group take 4 more registers). Before sm_90 the bf16x2
// subtract is emulated and needs registers of its own: 3/4 of that there (no spills at 128).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define TSI_KEY_WORDS 48
#else
#define TSI_KEY_WORDS 64
#endif
template <int D, int NB>
struct TsiLayout {
  static constexpr int WORDS = TssLayout<D, true>::WORDS;  // words per lane per key
  static constexpr int KEY_WORDS = (D > 128 ? TSI_KEY_WORDS / 2 : TSI_KEY_WORDS) / NB;
  static constexpr int UQ = KEY_WORDS / (2 * WORDS);
  static constexpr int U = UQ < 1 ? 1 : UQ > 8 ? 8 : UQ;
};

// One warp's share of the split [lo, hi): logits stored, lane (r, t)'s statistics (m[nb], l[nb]) of
// head nb * 4 + t over keys r, r + 8 of every group it scored.
template <int D, int NB>
__device__ __forceinline__ void tsi_body(float* __restrict__ logits, const unsigned char* __restrict__ kq,
                                         const float* __restrict__ ks, const float* __restrict__ qf, int g, int group,
                                         int nKv, int gqaMod, int sinks, int cands, int lo, int hi, float voteScale,
                                         float* m, float* l) {
  using Lay = TssLayout<D, true>;
  constexpr int W = Lay::W, KS = D / 16, WORDS = Lay::WORDS, U = TsiLayout<D, NB>::U;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r = lane >> 2, t = lane & 3;  // r: A row (keys r, r + 8) and B column; t: quad lane

  // B fragments: column r = head nb * 4 + r / 2, its hi (r even) or lo (r odd) part at the
  // permuted dims; zero columns past the group
  unsigned b[NB][KS][2];
  int hOut[NB];     // the head of this lane's C columns 2t, 2t + 1
  bool outOn[NB];
#pragma unroll
  for (int nb = 0; nb < NB; nb++) {
    const int j = nb * TSI_COLS + (r >> 1);
    const bool colOn = j < group;
    const float* q = qf + (size_t)tss_head(g, colOn ? j : 0, group, nKv, gqaMod) * D;
#pragma unroll
    for (int kk = 0; kk < KS; kk++)
#pragma unroll
      for (int p = 0; p < 2; p++) {  // p 0: elements 0, 1 (b0); p 1: elements 2, 3 (b1)
        float x0 = colOn ? q[tss_dim<D, true>(kk, 2 * p, t)] : 0.f;
        float x1 = colOn ? q[tss_dim<D, true>(kk, 2 * p + 1, t)] : 0.f;
        float h0 = bf2f(f2bf(x0)), h1 = bf2f(f2bf(x1));
        b[nb][kk][p] = (r & 1) ? pack_bf16(x0 - h0, x1 - h1) : pack_bf16(h0, h1);
      }
    const int jo = nb * TSI_COLS + t;
    outOn[nb] = jo < group;
    hOut[nb] = tss_head(g, outOn[nb] ? jo : 0, group, nKv, gqaMod);
  }

  const int s0 = lo & ~15;  // groups of 16 aligned slots: whole 32-byte sectors of logits
  const int nGroups = lo < hi ? (hi - s0 + 15) / 16 : 0;
  const int nIt = (nGroups + U - 1) / U;
  for (int it = warp; it < nIt; it += TSS_WARPS) {  // warp-uniform: the mma needs the whole warp
    unsigned kw[U][2][WORDS];  // keys r, r + 8 of each group, this lane's chunks
    float sc[U][2];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        const int slot = s0 + (it * U + u) * 16 + r + 8 * rr;
        const int sl = min(max(slot, lo), hi - 1);  // in the split: its logit is dropped below
        const unsigned char* row = kq + ((size_t)sl * nKv + g) * (D / 2);
#pragma unroll
        for (int i = 0; i < Lay::CHUNKS; i++)
          tss_load<Lay::CB>(&kw[u][rr][i * Lay::WPC], row + (i * 4 * W + t * W) / 2, true);
        sc[u][rr] = __ldg(ks + (size_t)sl * nKv + g);
      }
    float sv[NB][U][2];  // the logits for the statistics, -inf where dropped
#pragma unroll
    for (int u = 0; u < U; u++) {
      float c[NB][4];
#pragma unroll
      for (int nb = 0; nb < NB; nb++) c[nb][0] = c[nb][1] = c[nb][2] = c[nb][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < KS; kk++) {
        // rows r (a0, a2) and r + 8 (a1, a3): k-step kk = word kk / 2, nibble pairs p, p + 1
        const int wi = kk >> 1, p = 2 * (kk & 1);
        unsigned a[4];
        a[0] = tsi_pair(kw[u][0][wi], p);
        a[1] = tsi_pair(kw[u][1][wi], p);
        a[2] = tsi_pair(kw[u][0][wi], p + 1);
        a[3] = tsi_pair(kw[u][1][wi], p + 1);
#pragma unroll
        for (int nb = 0; nb < NB; nb++) mma_bf16(c[nb], a, b[nb][kk][0], b[nb][kk][1]);
      }
      // c[2rr] (key r + 8rr, head hi) + c[2rr + 1] (its lo part): head nb * 4 + t's dot product
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        const int se = s0 + (it * U + u) * 16 + r + 8 * rr;
        const bool in = se >= lo && se < hi;
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
          const float s = voteScale * (sc[u][rr] * (c[nb][2 * rr] + c[nb][2 * rr + 1]));
          const bool ok = in && outOn[nb];
          if (ok) logits[(size_t)hOut[nb] * cands + (se - sinks)] = s;
          sv[nb][u][rr] = ok ? s : -INFINITY;
        }
      }
    }
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
      float mx = -INFINITY;
#pragma unroll
      for (int u = 0; u < U; u++) mx = fmaxf(mx, fmaxf(sv[nb][u][0], sv[nb][u][1]));
      if (mx != -INFINITY) {
        const float mn = fmaxf(m[nb], mx);
        float acc = l[nb] * expf(m[nb] - mn);  // 0 while m is still -inf
#pragma unroll
        for (int u = 0; u < U; u++) acc += expf(sv[nb][u][0] - mn) + expf(sv[nb][u][1] - mn);
        l[nb] = acc;
        m[nb] = mn;
      }
    }
  }
}

// Grid (nKv, splits), TSS_WARPS * 32 threads, as ts_score_d*: block (g, split) scores candidates
// [split * chunk, +chunk) of KV head g for all `group` heads; logits (heads, cands) f32, partMl
// (heads, splits, 2) f32 the split's softmax (max, sum) per head.
template <int D>
__device__ __forceinline__ void tsi_score(float* __restrict__ logits, float* __restrict__ partMl,
                                          const int* __restrict__ hit, const unsigned char* __restrict__ kq,
                                          const float* __restrict__ ks, const float* __restrict__ qf, int heads,
                                          int nKv, int sinks, int cands, int chunk, int gqaMod, float voteScale,
                                          const int* __restrict__ step) {
  cands = step_size(step, STEP_CANDS, cands);  // its load goes out with the flag's
  if (*hit) return;
  const int g = blockIdx.x, split = blockIdx.y, splits = gridDim.y, group = heads / nKv;
  const int lane = threadIdx.x & 31, r = lane >> 2, t = lane & 3;
  const int lo = sinks + split * chunk, hi = sinks + min(cands, split * chunk + chunk);  // slots of the split
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // heads t and 4 + t over this lane's keys
  if (group <= TSI_COLS)
    tsi_body<D, 1>(logits, kq, ks, qf, g, group, nKv, gqaMod, sinks, cands, lo, hi, voteScale, m, l);
  else
    tsi_body<D, 2>(logits, kq, ks, qf, g, group, nKv, gqaMod, sinks, cands, lo, hi, voteScale, m, l);
  // the 8 lanes of quad lane t (4, 8, 16 apart) hold heads t, 4 + t: merge them, then the warps
  tss_split_stats<2, 4, 16>(partMl, m, l, r == 0, t, TSI_COLS, g, group, nKv, gqaMod, split, splits);
}

#define TS_SCORE_INT4(D)                                                                                          \
  extern "C" __global__ void __launch_bounds__(TSS_WARPS * 32, 4)                                                 \
      ts_score_int4_d##D(float* logits, float* partMl, const int* hit, const unsigned char* kq, const float* ks, \
                         const float* qf, int heads, int nKv, int sinks, int cands, int chunk, int gqaMod,        \
                         float voteScale, const int* step) {                                                      \
    tsi_score<D>(logits, partMl, hit, kq, ks, qf, heads, nKv, sinks, cands, chunk, gqaMod, voteScale, step);     \
  }
TS_SCORE_INT4(16)
TS_SCORE_INT4(32)
TS_SCORE_INT4(64)
TS_SCORE_INT4(128)
TS_SCORE_INT4(256)
