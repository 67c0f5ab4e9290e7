// Dense causal attention over the paged KV cache (page, nKv, pageSize, headDim) bf16, keys already
// rotated (the krope copy). Query row i of a call sits at slot `before + i` and sees slots
// [max(0, before + i + 1 - window), before + i + 1) (window 0: no sliding window). GQA: query head
// h reads KV head h / (nHeads / nKv). CPU twin: attention/DenseAttention.
//   flash_prefill_d64 / _d128: tensor-core flash attention (mma.sync), 64 queries x one head per
//       block, online softmax in registers, K/V tiles of one page (pageSize must be 64), double
//       buffered with cp.async; no L x L matrix anywhere.
//   attn_split + attn_combine: flash decoding. Each block takes one KV head, one query row and one
//       split of the key range; it scores the split's keys for all heads of the group, softmaxes
//       them in shared memory and writes an unnormalised partial output with its max and sum; the
//       combine kernel merges the splits. Any headDim that is a power of two in [8, 256], any
//       group size up to 8. Used for decode and as the prefill path for head sizes the tensor-core
//       kernel does not cover.
#include "common.cuh"

#define FA_BQ 64
#define FA_BK 64
#define FA_THREADS 128

template <int D>
__device__ __forceinline__ void flash_prefill(bf16* __restrict__ out, const bf16* __restrict__ Q,
                                              const bf16* __restrict__ K, const bf16* __restrict__ V,
                                              const int* __restrict__ pageTable, int n, int nHeads, int nKv,
                                              int before, int window, float scale) {
  constexpr int LD = D + 8;  // padded rows: ldmatrix rows land in distinct bank groups
  extern __shared__ __align__(16) unsigned char fa_smem[];
  bf16* sQ = reinterpret_cast<bf16*>(fa_smem);  // (FA_BQ, LD)
  bf16* sK = sQ + FA_BQ * LD;                    // 2 x (FA_BK, LD)
  bf16* sV = sK + 2 * FA_BK * LD;                // 2 x (FA_BK, LD)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int qt = gridDim.x - 1 - blockIdx.x;  // heaviest (latest) query tiles first
  const int h = blockIdx.y, kvh = h / (nHeads / nKv);
  const int q0 = qt * FA_BQ;
  const int rowsHere = min(FA_BQ, n - q0);
  const int kvEnd = before + q0 + rowsHere;  // exclusive end for the block's last row
  int kvStart = window > 0 ? max(0, before + q0 + 1 - window) : 0;
  const int t0 = kvStart / FA_BK, t1 = (kvEnd + FA_BK - 1) / FA_BK;

  // Q tile → shared → registers
  for (int c = tid; c < FA_BQ * D / 8; c += FA_THREADS) {
    int r = c / (D / 8), col = (c % (D / 8)) * 8;
    bool ok = r < rowsHere;
    cp_async16(sQ + r * LD + col, ok ? (const void*)(Q + ((size_t)(q0 + r) * nHeads + h) * D + col) : (const void*)Q,
               ok ? 16 : 0);
  }
  cp_async_commit();

  auto loadKV = [&](int buf, int t) {
    const int page = pageTable[t];
    const bf16* kb = K + ((size_t)page * nKv + kvh) * FA_BK * D;
    const bf16* vb = V + ((size_t)page * nKv + kvh) * FA_BK * D;
    bf16* dk = sK + buf * FA_BK * LD;
    bf16* dv = sV + buf * FA_BK * LD;
    for (int c = tid; c < FA_BK * D / 8; c += FA_THREADS) {
      int r = c / (D / 8), col = (c % (D / 8)) * 8;
      bool ok = t * FA_BK + r < kvEnd;  // rows past the end are zero-filled: 0 * garbage must not be NaN
      cp_async16(dk + r * LD + col, ok ? (const void*)(kb + r * D + col) : (const void*)K, ok ? 16 : 0);
      cp_async16(dv + r * LD + col, ok ? (const void*)(vb + r * D + col) : (const void*)V, ok ? 16 : 0);
    }
  };
  if (t0 < t1) loadKV(0, t0);
  cp_async_commit();

  cp_async_wait<1>();
  __syncthreads();
  unsigned qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++)
    ldmatrix_x4(qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3],
                sQ + (warp * 16 + (lane & 15)) * LD + kk * 16 + (lane >> 4) * 8);

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; i++)
#pragma unroll
    for (int e = 0; e < 4; e++) o[i][e] = 0.f;
  float mRow[2] = {-INFINITY, -INFINITY}, lRow[2] = {0.f, 0.f};
  const float sl2 = scale * 1.4426950408889634f;  // scores in log2 units: exp2f below
  const int g = lane >> 2, qd = lane & 3;
  const int rowA = q0 + warp * 16 + g;  // this thread's two query rows: rowA and rowA + 8

  for (int t = t0; t < t1; t++) {
    const int buf = (t - t0) & 1;
    if (t + 1 < t1) loadKV(buf ^ 1, t + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const bf16* k = sK + buf * FA_BK * LD;
    const bf16* v = sV + buf * FA_BK * LD;

    float s[FA_BK / 8][4];
#pragma unroll
    for (int i = 0; i < FA_BK / 8; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[i][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
      for (int np = 0; np < FA_BK / 16; np++) {
        unsigned b0, b1, b2, b3;
        ldmatrix_x4(b0, b1, b2, b3, k + (np * 16 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 + ((lane >> 3) & 1) * 8);
        mma_bf16(s[2 * np], qf[kk], b0, b1);
        mma_bf16(s[2 * np + 1], qf[kk], b2, b3);
      }

    // mask, running max, rescale
    float mNew[2] = {mRow[0], mRow[1]};
#pragma unroll
    for (int i = 0; i < FA_BK / 8; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int r = rowA + (e >> 1) * 8;
        int key = t * FA_BK + i * 8 + qd * 2 + (e & 1);
        int end = before + r + 1;
        bool vis = r < n && key < end && (window <= 0 || key >= end - window);
        float x = vis ? s[i][e] * sl2 : -INFINITY;
        s[i][e] = x;
        mNew[e >> 1] = fmaxf(mNew[e >> 1], x);
      }
    float alpha[2];
#pragma unroll
    for (int j = 0; j < 2; j++) {
      mNew[j] = fmaxf(mNew[j], __shfl_xor_sync(0xffffffffu, mNew[j], 1));
      mNew[j] = fmaxf(mNew[j], __shfl_xor_sync(0xffffffffu, mNew[j], 2));
      float mUse = mNew[j] == -INFINITY ? 0.f : mNew[j];
      alpha[j] = exp2f(mRow[j] - mUse);  // exp2(-inf) = 0 on the first visible tile
      mRow[j] = mNew[j];
      lRow[j] *= alpha[j];
    }
    float mUse0 = mRow[0] == -INFINITY ? 0.f : mRow[0], mUse1 = mRow[1] == -INFINITY ? 0.f : mRow[1];
#pragma unroll
    for (int i = 0; i < FA_BK / 8; i++) {
      s[i][0] = exp2f(s[i][0] - mUse0);
      s[i][1] = exp2f(s[i][1] - mUse0);
      s[i][2] = exp2f(s[i][2] - mUse1);
      s[i][3] = exp2f(s[i][3] - mUse1);
      lRow[0] += s[i][0] + s[i][1];
      lRow[1] += s[i][2] + s[i][3];
    }
#pragma unroll
    for (int i = 0; i < D / 8; i++) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }
    // O += P V, P re-packed from the score accumulators as bf16 A fragments
#pragma unroll
    for (int j = 0; j < FA_BK / 16; j++) {
      unsigned pa[4] = {pack_bf16(s[2 * j][0], s[2 * j][1]), pack_bf16(s[2 * j][2], s[2 * j][3]),
                        pack_bf16(s[2 * j + 1][0], s[2 * j + 1][1]), pack_bf16(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; dp++) {
        unsigned b0, b1, b2, b3;
        ldmatrix_x4_trans(b0, b1, b2, b3,
                          v + (j * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + dp * 16 + (lane >> 4) * 8);
        mma_bf16(o[2 * dp], pa, b0, b1);
        mma_bf16(o[2 * dp + 1], pa, b2, b3);
      }
    }
    __syncthreads();  // the buffer just read is refilled by the next iteration's prefetch
  }

#pragma unroll
  for (int j = 0; j < 2; j++) lRow[j] += __shfl_xor_sync(0xffffffffu, lRow[j], 1), lRow[j] += __shfl_xor_sync(0xffffffffu, lRow[j], 2);
  float inv0 = lRow[0] > 0.f ? 1.f / lRow[0] : 0.f, inv1 = lRow[1] > 0.f ? 1.f / lRow[1] : 0.f;
#pragma unroll
  for (int i = 0; i < D / 8; i++) {
    int col = i * 8 + qd * 2;
    if (rowA < n) {
      *reinterpret_cast<__nv_bfloat162*>(out + ((size_t)rowA * nHeads + h) * D + col) =
          __floats2bfloat162_rn(o[i][0] * inv0, o[i][1] * inv0);
    }
    if (rowA + 8 < n) {
      *reinterpret_cast<__nv_bfloat162*>(out + ((size_t)(rowA + 8) * nHeads + h) * D + col) =
          __floats2bfloat162_rn(o[i][2] * inv1, o[i][3] * inv1);
    }
  }
}

extern "C" __global__ void __launch_bounds__(FA_THREADS)
    flash_prefill_d64(bf16* out, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable, int n,
                      int nHeads, int nKv, int before, int window, float scale) {
  flash_prefill<64>(out, Q, K, V, pageTable, n, nHeads, nKv, before, window, scale);
}
extern "C" __global__ void __launch_bounds__(FA_THREADS)
    flash_prefill_d128(bf16* out, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable, int n,
                       int nHeads, int nKv, int before, int window, float scale) {
  flash_prefill<128>(out, Q, K, V, pageTable, n, nHeads, nKv, before, window, scale);
}

#define AS_THREADS 256
#define AS_UNROLL 8      // keys per thread whose loads are in flight together
#define AS_MAX_PAGES 40  // page-table entries of one split staged in shared memory (chunk / pageSize + 1)

// Dynamic shared memory: G * chunk floats of scores + AS_THREADS * 8 floats for the reduction.
// partO (rows, nHeads, splits, D) f32 unnormalised; partML (rows, nHeads, splits, 2) f32 (max, sum).
// MAXG bounds the group size at compile time (register arrays); G <= MAXG at run time.
template <int MAXG>
__device__ __forceinline__ void attn_split_body(float* __restrict__ partO, float* __restrict__ partML,
                                                const bf16* __restrict__ Q, const bf16* __restrict__ K,
                                                const bf16* __restrict__ V, const int* __restrict__ pageTable,
                                                int nHeads, int nKv, int D, int pageSize, int before, int window,
                                                int chunk, float scale) {
  extern __shared__ float sh[];
  __shared__ float stat[MAXG][2];
  __shared__ int pages[AS_MAX_PAGES];
  const int kvh = blockIdx.x, split = blockIdx.y, row = blockIdx.z, splits = gridDim.y;
  const int G = nHeads / nKv, tid = threadIdx.x;
  const int TPK = D / 8, KPP = AS_THREADS / TPK;  // threads per key, keys per pass
  const int pageShift = __ffs(pageSize) - 1;
  const int end = before + row + 1;
  const int start = window > 0 ? max(0, end - window) : 0;
  const int ks = start + split * chunk, ke = min(end, ks + chunk);
  float* sc = sh;                // (G, chunk) scores, then probabilities
  float* red = sh + G * chunk;   // (AS_THREADS * 8) reduction scratch

  // this split's pages, looked up once: the loads below then depend on nothing but shared memory
  const int firstPage = ks >> pageShift;
  if (ks < ke) {
    const int nPages = ((ke - 1) >> pageShift) - firstPage + 1;
    for (int i = tid; i < nPages; i += AS_THREADS) pages[i] = pageTable[firstPage + i];
  }
  __syncthreads();
  auto addr = [&](int key) -> size_t {
    int page = pages[(key >> pageShift) - firstPage];
    return (((size_t)page * nKv + kvh) * pageSize + (key & (pageSize - 1))) * (size_t)D;
  };

  const int sub = tid % TPK, kslot = tid / TPK, d0 = sub * 8;
  float qv[MAXG][8];
#pragma unroll
  for (int g = 0; g < MAXG; g++) {
    if (g < G) {
      uint4 raw = *reinterpret_cast<const uint4*>(Q + ((size_t)row * nHeads + kvh * G + g) * D + d0);
      const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
      for (int j = 0; j < 4; j++) {
        float2 f = __bfloat1622float2(p[j]);
        qv[g][2 * j] = f.x * scale;
        qv[g][2 * j + 1] = f.y * scale;
      }
    }
  }

  // phase 1: scores of every key of the split for every head of the group. The loop bounds are
  // the same for every thread: the shuffles below need whole warps.
  for (int base = ks; base < ke; base += AS_UNROLL * KPP) {
    uint4 kr[AS_UNROLL];
#pragma unroll
    for (int u = 0; u < AS_UNROLL; u++) {
      int key = base + u * KPP + kslot;
      kr[u] = key < ke ? __ldg(reinterpret_cast<const uint4*>(K + addr(key) + d0)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < AS_UNROLL; u++) {
      int key = base + u * KPP + kslot;
      const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&kr[u]);
      float kf[8];
#pragma unroll
      for (int j = 0; j < 4; j++) {
        float2 f = __bfloat1622float2(p[j]);
        kf[2 * j] = f.x;
        kf[2 * j + 1] = f.y;
      }
#pragma unroll
      for (int g = 0; g < MAXG; g++) {
        if (g < G) {
          float s = 0.f;
#pragma unroll
          for (int j = 0; j < 8; j++) s = fmaf(qv[g][j], kf[j], s);
          for (int o = TPK / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
          if (sub == 0 && key < ke) sc[g * chunk + (key - ks)] = s;
        }
      }
    }
  }
  __syncthreads();

  // phase 2: per-head max and sum over the split; scores become exp(s - max)
  const int nk = max(0, ke - ks);
  for (int g = 0; g < G; g++) {
    float m = -INFINITY;
    for (int i = tid; i < nk; i += AS_THREADS) m = fmaxf(m, sc[g * chunk + i]);
    m = block_max(m, red);
    float l = 0.f;
    for (int i = tid; i < nk; i += AS_THREADS) {
      float e = __expf(sc[g * chunk + i] - m);
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

  // phase 3: P V for every head of the group
  float acc[MAXG][8];
#pragma unroll
  for (int g = 0; g < MAXG; g++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[g][j] = 0.f;
  for (int base = ks; base < ke; base += AS_UNROLL * KPP) {
    uint4 vr[AS_UNROLL];
#pragma unroll
    for (int u = 0; u < AS_UNROLL; u++) {
      int key = base + u * KPP + kslot;
      vr[u] = key < ke ? __ldg(reinterpret_cast<const uint4*>(V + addr(key) + d0)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < AS_UNROLL; u++) {
      int key = base + u * KPP + kslot;
      if (key < ke) {
        const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&vr[u]);
        float vf[8];
#pragma unroll
        for (int j = 0; j < 4; j++) {
          float2 f = __bfloat1622float2(p[j]);
          vf[2 * j] = f.x;
          vf[2 * j + 1] = f.y;
        }
#pragma unroll
        for (int g = 0; g < MAXG; g++) {
          if (g < G) {
            float pr = sc[g * chunk + (key - ks)];
#pragma unroll
            for (int j = 0; j < 8; j++) acc[g][j] = fmaf(pr, vf[j], acc[g][j]);
          }
        }
      }
    }
  }
  // reduce the KPP key slots of each head through shared memory
  const size_t base = ((size_t)row * nHeads + kvh * G) * splits + split;
#pragma unroll
  for (int g = 0; g < MAXG; g++) {
    if (g < G) {
      __syncthreads();
#pragma unroll
      for (int j = 0; j < 8; j++) red[kslot * D + d0 + j] = acc[g][j];
      __syncthreads();
      for (int d = tid; d < D; d += AS_THREADS) {
        float s = 0.f;
        for (int r = 0; r < KPP; r++) s += red[r * D + d];
        partO[((base + (size_t)g * splits) * D) + d] = s;
      }
      if (tid == 0) {
        partML[(base + (size_t)g * splits) * 2] = stat[g][0];
        partML[(base + (size_t)g * splits) * 2 + 1] = stat[g][1];
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(AS_THREADS, 2)
    attn_split_g4(float* partO, float* partML, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable,
                  int nHeads, int nKv, int D, int pageSize, int before, int window, int chunk, float scale) {
  attn_split_body<4>(partO, partML, Q, K, V, pageTable, nHeads, nKv, D, pageSize, before, window, chunk, scale);
}
extern "C" __global__ void __launch_bounds__(AS_THREADS)
    attn_split_g8(float* partO, float* partML, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable,
                  int nHeads, int nKv, int D, int pageSize, int before, int window, int chunk, float scale) {
  attn_split_body<8>(partO, partML, Q, K, V, pageTable, nHeads, nKv, D, pageSize, before, window, chunk, scale);
}

// out (rows, nHeads, D) bf16 = merge of the splits' partial outputs. Grid (nHeads, rows), block D.
extern "C" __global__ void attn_combine(bf16* __restrict__ out, const float* __restrict__ partO,
                                        const float* __restrict__ partML, int nHeads, int splits, int D) {
  const int h = blockIdx.x, row = blockIdx.y;
  const size_t base = ((size_t)row * nHeads + h) * splits;
  float m = -INFINITY;
  for (int s = 0; s < splits; s++) m = fmaxf(m, partML[(base + s) * 2]);
  float l = 0.f;
  for (int s = 0; s < splits; s++) {
    float ms = partML[(base + s) * 2];
    if (ms != -INFINITY) l += partML[(base + s) * 2 + 1] * __expf(ms - m);
  }
  float inv = l > 0.f ? 1.f / l : 0.f;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < splits; s++) {
      float ms = partML[(base + s) * 2];
      if (ms != -INFINITY) acc += partO[(base + s) * D + d] * __expf(ms - m);
    }
    out[((size_t)row * nHeads + h) * D + d] = f2bf(acc * inv);
  }
}
