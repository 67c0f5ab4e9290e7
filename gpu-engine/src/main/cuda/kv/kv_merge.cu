// KV compression, stage 3 (see kv_compress.cu): SelKV's nearest kept key per dropped key (f32 tiles and
// tensor cores), the gated merge and logit bias (the compaction that follows: kv_compact.cu). CPU twin:
// cpu/policy/SelKv.
#include "kv_tile.cuh"

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

// One kept tile's step of the nearest-key search (kvc_nearest, nearest_mma), folded into the running
// best (bv, bi) of the earlier tiles: the first maximum among the N candidates this thread holds
// (cand(c, t) returns candidate c's cosine and sets its kept index t, ascending with c; t >= nKeep is
// padding), then among the lanes xor OFF_FIRST .. OFF_LAST apart (doubling or halving; lower index on
// ties), then strictly greater than bv (earlier tiles hold lower indices: they win ties).
template <int N, int OFF_FIRST, int OFF_LAST, typename Cand>
__device__ __forceinline__ void kvc_argmax_tile(float& bv, int& bi, int nKeep, Cand cand) {
  float v = -INFINITY;
  int idx = 0x7fffffff;
#pragma unroll
  for (int c = 0; c < N; c++) {
    int t;
    const float x = cand(c, t);
    if (t < nKeep && x > v) {
      v = x;
      idx = t;
    }
  }
  constexpr bool UP = OFF_FIRST < OFF_LAST;
#pragma unroll
  for (int o = OFF_FIRST; UP ? o <= OFF_LAST : o >= OFF_LAST; o = UP ? o << 1 : o >> 1) {
    float ov = __shfl_xor_sync(0xffffffffu, v, o);
    int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > v || (ov == v && oi < idx)) {
      v = ov;
      idx = oi;
    }
  }
  if (v > bv) {
    bv = v;
    bi = idx;
  }
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
    for (int a = 0; a < 4; a++)  // this thread's keys ascend with b; then the 16 threads of the row
      kvc_argmax_tile<4, 8, 1>(bv[a], bi[a], nKeep, [&](int b, int& t) {
        t = t0 + tx + 16 * b;
        return acc[a][b];
      });
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
// Rows row0 .. row0 + 63 of the hi and lo halves (rows, D) bf16 into s: hi rows at s + r * LD, lo rows 64 * LD
// further; rows past `rows` zero. 128 threads, 16-byte pieces.
template <int D, int LD>
__device__ __forceinline__ void nm_load_hilo(bf16* s, const bf16* __restrict__ hi, const bf16* __restrict__ lo,
                                             int row0, int rows, int tid) {
  for (int c = tid; c < 64 * D / 8; c += 128) {
    int r = c / (D / 8), col = (c % (D / 8)) * 8, i = row0 + r;
    uint4 h = make_uint4(0, 0, 0, 0), l = h;
    if (i < rows) {
      h = *reinterpret_cast<const uint4*>(hi + (size_t)i * D + col);
      l = *reinterpret_cast<const uint4*>(lo + (size_t)i * D + col);
    }
    *reinterpret_cast<uint4*>(s + r * LD + col) = h;
    *reinterpret_cast<uint4*>(s + 64 * LD + r * LD + col) = l;
  }
}

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
  nm_load_hilo<D, LD>(sA, ah, al, i0, nDrop, tid);
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
    nm_load_hilo<D, LD>(sB, bh, bl, t0, nKeep, tid);
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
    for (int r = 0; r < 2; r++)  // this thread's keys ascend with c = (j, e2); then the quad's four threads
      kvc_argmax_tile<16, 1, 2>(bv[r], bi[r], nKeep, [&](int c, int& t) {
        const int j = c >> 1, e2 = c & 1;
        t = t0 + j * 8 + qd * 2 + e2;
        return s[j][r * 2 + e2];
      });
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
