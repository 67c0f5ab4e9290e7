// Matrix products of the forward pass, C (M, N) = A (M, K) . W (N, K)^T (+ bias), both operands
// bf16 with K contiguous (PyTorch's Linear layout), f32 accumulation. CPU twin: CpuOps.matmul.
//   gemm_bf16:  prefill, tensor cores through mma.sync m16n8k16, 128x128x64 tiles, 8 warps,
//               a 3-stage cp.async pipeline; any M, N; K a multiple of 8.
//   gemv_bf16_bN: decode on CUDA cores, warps per output row streaming W once with 16-byte loads, for
//               N rows of activations (N = 1, 2, 4, 8); any M <= N rows, K a multiple of 8. The fastest
//               for one row: engines that decode one sequence at a time run it.
//   gemv_mma_wN: decode on tensor cores, 16 output columns a block, for 1-8 rows; engines that batch
//               run it (Kernels.Gemv).
#include "../common/common.cuh"

#define GB_M 128
#define GB_N 128
#define GB_K 64
#define GB_LD (GB_K + 8)  // padded row (144 B) so ldmatrix's 8 rows hit 8 different bank groups
#define GB_THREADS 256
#define GB_GROUP 8

__device__ __forceinline__ void store_out(void* out, int mode, size_t idx, float v) {
  if (mode == OUT_F32) ((float*)out)[idx] = v;
  else if (mode == OUT_F32_ADD) ((float*)out)[idx] += v;
  else ((bf16*)out)[idx] = f2bf(v);
}

// Dynamic shared memory: GB_STAGES x (A tile GB_M x GB_LD + W tile GB_N x GB_LD) bf16: 108 KB for
// 3 stages (sm_80, sm_90), 72 KB for 2 (sm_86 / sm_89 allow at most 99 KB per block).
template <int GB_STAGES>
__device__ __forceinline__ void gemm_body(void* __restrict__ out, const bf16* __restrict__ A,
                                          const bf16* __restrict__ W, const float* __restrict__ bias, int M, int N,
                                          int K, int mode) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* sm = reinterpret_cast<bf16*>(smem_raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3;  // 2 x 4 warps, each 64 rows x 32 columns
  // grouped raster (1-D grid): GB_GROUP consecutive row tiles walk the column tiles together, so a
  // tile of W is read from DRAM about once per group instead of once per row tile
  const int mTiles = (M + GB_M - 1) / GB_M, nTiles = (N + GB_N - 1) / GB_N;
  const int perGroup = GB_GROUP * nTiles, group = blockIdx.x / perGroup;
  const int firstM = group * GB_GROUP, groupM = min(mTiles - firstM, GB_GROUP);
  const int tileM = firstM + (blockIdx.x % perGroup) % groupM, tileN = (blockIdx.x % perGroup) / groupM;
  const int m0 = tileM * GB_M, n0 = tileN * GB_N;
  const int kTiles = (K + GB_K - 1) / GB_K;

  auto stageA = [&](int s) { return sm + s * (GB_M + GB_N) * GB_LD; };
  auto stageB = [&](int s) { return sm + s * (GB_M + GB_N) * GB_LD + GB_M * GB_LD; };

  auto load = [&](int s, int kt) {
    int k0 = kt * GB_K;
    bf16* a = stageA(s);
    bf16* b = stageB(s);
#pragma unroll
    for (int r = 0; r < GB_M * GB_K / 8 / GB_THREADS; r++) {
      int c = tid + r * GB_THREADS;  // chunks of 8 elements per operand tile
      int row = c / (GB_K / 8), col = (c % (GB_K / 8)) * 8;
      int gk = k0 + col;
      int gm = m0 + row;
      bool okA = gm < M && gk < K;
      cp_async16(a + row * GB_LD + col, okA ? (const void*)(A + (size_t)gm * K + gk) : (const void*)A, okA ? 16 : 0);
      int gn = n0 + row;
      bool okB = gn < N && gk < K;
      cp_async16(b + row * GB_LD + col, okB ? (const void*)(W + (size_t)gn * K + gk) : (const void*)W, okB ? 16 : 0);
    }
  };

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < GB_STAGES - 1; s++) {
    if (s < kTiles) load(s, s);
    cp_async_commit();
  }

  for (int kt = 0; kt < kTiles; kt++) {
    cp_async_wait<GB_STAGES - 2>();
    __syncthreads();
    int nxt = kt + GB_STAGES - 1;
    if (nxt < kTiles) load(nxt % GB_STAGES, nxt);
    cp_async_commit();

    const bf16* a = stageA(kt % GB_STAGES);
    const bf16* b = stageB(kt % GB_STAGES);
#pragma unroll
    for (int ks = 0; ks < GB_K / 16; ks++) {
      unsigned af[4][4], bfr[4][2];
#pragma unroll
      for (int mt = 0; mt < 4; mt++) {
        const bf16* p = a + (wm * 64 + mt * 16 + (lane & 15)) * GB_LD + ks * 16 + (lane >> 4) * 8;
        ldmatrix_x4(af[mt][0], af[mt][1], af[mt][2], af[mt][3], p);
      }
#pragma unroll
      for (int np = 0; np < 2; np++) {
        const bf16* p = b + (wn * 32 + np * 16 + (lane & 7) + (lane >> 4) * 8) * GB_LD + ks * 16 + ((lane >> 3) & 1) * 8;
        ldmatrix_x4(bfr[2 * np][0], bfr[2 * np][1], bfr[2 * np + 1][0], bfr[2 * np + 1][1], p);
      }
#pragma unroll
      for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++) mma_bf16(acc[mt][nt], af[mt], bfr[nt][0], bfr[nt][1]);
    }
  }
  cp_async_wait<0>();

  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 4; mt++)
#pragma unroll
    for (int nt = 0; nt < 4; nt++)
#pragma unroll
      for (int h = 0; h < 2; h++) {  // the two adjacent columns of a row go out as one 8- or 4-byte store
        int row = m0 + wm * 64 + mt * 16 + g + h * 8;
        int col = n0 + wn * 32 + nt * 8 + q * 2;
        if (row >= M || col >= N) continue;
        float v0 = acc[mt][nt][2 * h], v1 = acc[mt][nt][2 * h + 1];
        if (bias) {
          v0 += bias[col];
          if (col + 1 < N) v1 += bias[col + 1];
        }
        size_t idx = (size_t)row * N + col;
        bool pair = col + 1 < N && (N % 2 == 0);  // even N keeps the pair aligned
        if (pair && mode == OUT_F32) {
          *reinterpret_cast<float2*>((float*)out + idx) = make_float2(v0, v1);
        } else if (pair && mode == OUT_BF16) {
          *reinterpret_cast<__nv_bfloat162*>((bf16*)out + idx) = __floats2bfloat162_rn(v0, v1);
        } else {
          store_out(out, mode, idx, v0);
          if (col + 1 < N) store_out(out, mode, idx + 1, v1);
        }
      }
}

// 16-byte read-only load as volatile PTX: kept in program order, so every load of a batch is issued
// before the arithmetic that consumes the first one (plain loads were scheduled one by one).
__device__ __forceinline__ uint4 ld_nc_v4(const bf16* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

extern "C" __global__ void __launch_bounds__(GB_THREADS, 2)
    gemm_bf16(void* out, const bf16* A, const bf16* W, const float* bias, int M, int N, int K, int mode) {
  gemm_body<3>(out, A, W, bias, M, N, K, mode);
}
extern "C" __global__ void __launch_bounds__(GB_THREADS, 2)
    gemm_bf16_s2(void* out, const bf16* A, const bf16* W, const float* bias, int M, int N, int K, int mode) {
  gemm_body<2>(out, A, W, bias, M, N, K, mode);
}

// GEMV_WPR warps share C output columns (rows of W), each taking every GEMV_WPR-th 256-wide slice of
// K for all C; x holds M <= NB activation rows (M, K) bf16. Many short warps per column keep enough
// loads in flight to stream W near the copy bandwidth even for 4096-row matrices; C > 1 reuses each
// activation load for C columns (with 8 rows the activations, re-read per column from L2, otherwise
// outweigh the weights). Each (column, row) is accumulated in the same order for every C, U and NB:
// lane order over K, then the warp sum, then the GEMV_WPR partials in warp order, so a row's result
// does not depend on the batch it came in or the variant that ran it.
#define GEMV_WPR 4
template <int NB, int U, int C>
__device__ __forceinline__ void gemv_body(void* __restrict__ out, const bf16* __restrict__ x,
                                          const bf16* __restrict__ W, const float* __restrict__ bias, int M,
                                          int N, int K, int mode) {
  __shared__ float part[8][C][NB];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r = warp / GEMV_WPR, j = warp % GEMV_WPR;
  const int n0 = (blockIdx.x * (8 / GEMV_WPR) + r) * C;
  const bf16* w[C];
#pragma unroll
  for (int c = 0; c < C; c++) w[c] = W + (size_t)min(n0 + c, N - 1) * K;
  float acc[C][NB];
#pragma unroll
  for (int c = 0; c < C; c++)
#pragma unroll
    for (int b = 0; b < NB; b++) acc[c][b] = 0.f;
  for (int k0 = (j * 32 + lane) * 8; k0 < K; k0 += GEMV_WPR * 256 * U) {
    uint4 wv[U][C], xv[U][NB];
#pragma unroll
    for (int u = 0; u < U; u++) {
      // loads are unconditional (clamped address, then a select) so none sits behind a branch
      int k = k0 + u * GEMV_WPR * 256;
      int kc = min(k, K - 8);
#pragma unroll
      for (int c = 0; c < C; c++) {
        uint4 t = ld_nc_v4(w[c] + kc);
        wv[u][c] = k < K ? t : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int b = 0; b < NB; b++) {
        uint4 tx = ld_nc_v4(x + (size_t)min(b, M - 1) * K + kc);
        xv[u][b] = (k < K && b < M) ? tx : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
#pragma unroll
      for (int c = 0; c < C; c++) {
        const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&wv[u][c]);
#pragma unroll
        for (int b = 0; b < NB; b++) {
          const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&xv[u][b]);
#pragma unroll
          for (int q = 0; q < 4; q++) {
            float2 wf = __bfloat1622float2(wp[q]), xf = __bfloat1622float2(xp[q]);
            acc[c][b] = fmaf(wf.x, xf.x, acc[c][b]);
            acc[c][b] = fmaf(wf.y, xf.y, acc[c][b]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int c = 0; c < C; c++)
#pragma unroll
    for (int b = 0; b < NB; b++) {
      float v = warp_sum(acc[c][b]);
      if (lane == 0) part[warp][c][b] = v;
    }
  __syncthreads();
  if (j == 0) {
    for (int idx = lane; idx < C * NB; idx += 32) {
      const int c = idx / NB, b = idx % NB, n = n0 + c;
      if (b < M && n < N) {
        float v = 0.f;
#pragma unroll
        for (int i = 0; i < GEMV_WPR; i++) v += part[warp + i][c][b];
        store_out(out, mode, (size_t)b * N + n, bias ? v + bias[n] : v);
      }
    }
  }
}

// gemv_bf16_b<NB>_c<C>: NB activation rows, C columns per group of GEMV_WPR warps (Kernels.gemv picks C).
#define GEMV_KERNEL(NB, U, C)                                                                                  \
  extern "C" __global__ void gemv_bf16_b##NB##_c##C(void* out, const bf16* x, const bf16* W, const float* bias, \
                                                    int M, int N, int K, int mode) {                            \
    gemv_body<NB, U, C>(out, x, W, bias, M, N, K, mode);                                                        \
  }
GEMV_KERNEL(1, 4, 1)
GEMV_KERNEL(1, 2, 2)
GEMV_KERNEL(1, 1, 4)
GEMV_KERNEL(2, 4, 1)
GEMV_KERNEL(2, 2, 2)
GEMV_KERNEL(2, 1, 4)
GEMV_KERNEL(4, 2, 1)
GEMV_KERNEL(4, 2, 2)
GEMV_KERNEL(4, 1, 4)
GEMV_KERNEL(8, 1, 1)
GEMV_KERNEL(8, 1, 2)
GEMV_KERNEL(8, 1, 4)

// gemv_mma_w<WARPS>: the decode GEMV through tensor cores, for 1 to 8 activation rows. A block holds 16
// output columns (rows of W) as the 16 rows of mma.sync m16n8k16's A operand and the activation rows as
// the 8 columns of B (rows of x beyond M read as zeros), so each weight load serves every row of the batch
// and the activations are read once per 16 columns, not once per 1-4 as in gemv_bf16. K is dealt to the
// block's warps in 64-wide slices (warp w takes slices w, w + WARPS, ...), 2 slices in flight per warp;
// 16 warps for fewer columns keep enough loads in flight. (Splitting K across blocks, to shorten the last
// wave, measured slower: a block then reads its 16 rows in short runs.)
// Inside a slice each thread loads 32 contiguous bytes (two 16-byte vectors) of each of its two W rows
// and of its x row, so the 4 threads of a row read one whole 128-byte line (16 bytes each measured
// 3-17% slower at one row). The mma's logical k (2t, 2t+1, 2t+8, 2t+9 for lane 4g+t) maps to 4 of a
// thread's 16 values per mma, the same map for A and B, so the dot products are unchanged.
// Bits: a (column, row) value is the warps' partials summed in warp order, each accumulated slice by slice
// in the tensor core; only x's row b enters column b and WARPS depends on the shape alone
// (Kernels.gemvWarps), so a row's result does not depend on the batch it came in.
#define GM_U 2  // slices in flight per warp
template <int WARPS>
__device__ __forceinline__ void gemv_mma_body(void* __restrict__ out, const bf16* __restrict__ x,
                                              const bf16* __restrict__ W, const float* __restrict__ bias, int M,
                                              int N, int K, int mode) {
  __shared__ float part[WARPS][16][8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * 16;
  const bf16* w0 = W + (size_t)min(n0 + g, N - 1) * K;
  const bf16* w1 = W + (size_t)min(n0 + g + 8, N - 1) * K;
  const bf16* xr = x + (size_t)min(g, M - 1) * K;
  const bool row = g < M;
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  // the loop bound is the warp's (not the lane's) so every lane reaches each mma.sync
  for (int kw = warp * 64; kw < K; kw += WARPS * 64 * GM_U) {
    uint4 a[GM_U][2], b[GM_U][2], xv[GM_U][2];
#pragma unroll
    for (int u = 0; u < GM_U; u++)
#pragma unroll
      for (int v = 0; v < 2; v++) {
        int k = kw + u * WARPS * 64 + t * 16 + 8 * v;
        int kc = min(k, K - 8);
        // unconditional loads (clamped addresses, then selects): a branch would hold the later loads back
        uint4 ta = ld_nc_v4(w0 + kc), tb = ld_nc_v4(w1 + kc), tx = ld_nc_v4(xr + kc);
        bool in = k < K;
        a[u][v] = in ? ta : make_uint4(0, 0, 0, 0);
        b[u][v] = in ? tb : make_uint4(0, 0, 0, 0);
        xv[u][v] = in && row ? tx : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
    for (int u = 0; u < GM_U; u++)
#pragma unroll
      for (int v = 0; v < 2; v++) {
        const uint4 &p = a[u][v], &q = b[u][v], &r = xv[u][v];
        const unsigned lo[4] = {p.x, q.x, p.y, q.y}, hi[4] = {p.z, q.z, p.w, q.w};
        mma_bf16(d, lo, r.x, r.y);
        mma_bf16(d, hi, r.z, r.w);
      }
  }
  // d holds (column g, rows 2t, 2t + 1) and (column g + 8, the same rows)
  part[warp][g][2 * t] = d[0];
  part[warp][g][2 * t + 1] = d[1];
  part[warp][g + 8][2 * t] = d[2];
  part[warp][g + 8][2 * t + 1] = d[3];
  __syncthreads();
  if (threadIdx.x < 128) {
    const int c = threadIdx.x >> 3, r = threadIdx.x & 7, n = n0 + c;
    if (r < M && n < N) {
      float v = 0.f;
#pragma unroll
      for (int i = 0; i < WARPS; i++) v += part[i][c][r];
      store_out(out, mode, (size_t)r * N + n, bias ? v + bias[n] : v);
    }
  }
}

extern "C" __global__ void __launch_bounds__(256)
    gemv_mma_w8(void* out, const bf16* x, const bf16* W, const float* bias, int M, int N, int K, int mode) {
  gemv_mma_body<8>(out, x, W, bias, M, N, K, mode);
}
extern "C" __global__ void __launch_bounds__(512)
    gemv_mma_w16(void* out, const bf16* x, const bf16* W, const float* bias, int M, int N, int K, int mode) {
  gemv_mma_body<16>(out, x, W, bias, M, N, K, mode);
}
