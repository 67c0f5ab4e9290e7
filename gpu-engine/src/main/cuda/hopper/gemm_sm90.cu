// Prefill matrix products on Hopper (sm_90a): C (M, N) = A (M, K) . W (N, K)^T (+ bias), bf16
// operands with K contiguous, f32 accumulation; the same contract and output modes as gemm_bf16
// (gemm.cu, the sm_80 path), and the same CPU twin, CpuOps.matmul.
//
//   gemm_sm90: a persistent kernel, one block per multiprocessor walking 128 x 256 output tiles.
//     warpgroup 0 (the producer) has one thread issue TMA loads of 64-wide K slices of A (128 rows)
//     and W (256 rows) into a 4-stage ring of 128-byte-swizzled shared-memory tiles, each stage
//     guarded by a "full" mbarrier (TMA bytes landed) and an "empty" one (both consumers done);
//     warpgroups 1 and 2 (the consumers) each own 64 rows of the tile and run wgmma m64n256k16
//     from shared memory into 128 f32 registers, keeping one k-slice of wgmma in flight, then
//     write their rows (bias, then f32 / f32 += / bf16) straight from registers while the
//     producer already loads the next tile.
//   OUT_SWIGLU (the fused gate/up projection): W holds [gate (N/2 rows) | up (N/2 rows)]; a tile's
//     256 W rows are 128 gate rows and the 128 up rows of the same output columns, loaded as two
//     128-row boxes, so each thread holds gate and up of the same element and writes
//     silu(gate) * up (N/2 columns, bf16) without the (M, N) intermediate going through memory.
//     Gate and up are rounded to bf16 first, as the unfused path (gemm to bf16, swiglu_rows) and
//     transformers round them, so both paths give the same bits. Needs N/2 % 128 == 0, no bias.
// Edges: TMA zero-fills rows and columns past M, N and K, the epilogue masks the stores; K must be
// a multiple of 8 (16-byte global rows for TMA). The tensor maps are built on the host
// (TensorMaps.matrix) over A (box 64 x 128) and W (box 64 x 256) and passed in device memory.
#include "../common.cuh"
#include "sm90.cuh"

#define GH_BM 128
#define GH_BN 256
#define GH_BK 64
#define GH_STAGES 4
#define GH_THREADS 384
#define GH_A_BYTES (GH_BM * GH_BK * 2)
#define GH_B_BYTES (GH_BN * GH_BK * 2)
#define GH_STAGE_BYTES (GH_A_BYTES + GH_B_BYTES)
// 4 stages of 48 KB, the barriers, and room to align the ring to 1024 B (the swizzle's period)
#define GH_SMEM (GH_STAGES * GH_STAGE_BYTES + 1024 + 2 * GH_STAGES * 8)

// Tile t of the grouped raster: rowGroup consecutive row tiles walk the column tiles together, so
// a tile of W is read from memory about once per group (the host picks the group by shape).
__device__ __forceinline__ void gh_tile(int t, int mTiles, int nTiles, int rowGroup, int* tm, int* tn) {
  const int perGroup = rowGroup * nTiles, group = t / perGroup;
  const int firstM = group * rowGroup, groupM = min(mTiles - firstM, rowGroup);
  *tm = firstM + (t % perGroup) % groupM;
  *tn = (t % perGroup) / groupM;
}

__device__ __forceinline__ void gh_store(void* out, int mode, size_t idx, float v) {
  if (mode == OUT_F32) ((float*)out)[idx] = v;
  else if (mode == OUT_F32_ADD) ((float*)out)[idx] += v;
  else ((bf16*)out)[idx] = f2bf(v);
}

// The FP8 GEMM's scales (gemm_fp8_sm90.cu): sum (row, col) is multiplied by a[row] * w[col] (w's
// rows follow W's: [gate | up] for OUT_SWIGLU) before the bias. The bf16 GEMM has none (SCALED false).
struct GhScales {
  const float* a;
  const float* w;
};

// One consumer's 64 rows x BN columns (256; 128 in gemm_fp8_block_sm90): acc[4 j + e] is row 16 warp + g (+ 8 for e >= 2),
// column 8 j + 2 q (+ 1 for odd e), the wgmma accumulator layout. The residual add (f32 +=) reads
// eight column blocks' old values before it writes any, so the loads overlap instead of each
// waiting out a round trip behind the previous store.
template <int BN, bool SCALED = false>
__device__ __forceinline__ void gh_epilogue(const float* acc, void* out, const float* bias, int M, int N, int mode,
                                            int row0, int col0, GhScales sc = {nullptr, nullptr}) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, g = lane >> 2, q = lane & 3;
  const bool pairs = (N % 2) == 0;  // even N keeps each thread's two adjacent columns 8-byte aligned
#pragma unroll
  for (int j0 = 0; j0 < BN / 8; j0 += 8) {
    float2 old[8][2];
    if (mode == OUT_F32_ADD && pairs) {
#pragma unroll
      for (int j = 0; j < 8; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int row = row0 + 16 * warp + g + 8 * h, col = col0 + 8 * (j0 + j) + 2 * q;
          old[j][h] = row < M && col < N ? *reinterpret_cast<const float2*>((const float*)out + (size_t)row * N + col)
                                         : make_float2(0.f, 0.f);
        }
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const int col = col0 + 8 * (j0 + j) + 2 * q;
      if (col >= N) continue;
      const bool two = col + 1 < N;
      const float b0 = bias ? bias[col] : 0.f, b1 = bias && two ? bias[col + 1] : 0.f;
      const float w0 = SCALED ? sc.w[col] : 1.f, w1 = SCALED && two ? sc.w[col + 1] : 1.f;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int row = row0 + 16 * warp + g + 8 * h;
        if (row >= M) continue;
        const float a = SCALED ? sc.a[row] : 1.f;
        const float v0 = SCALED ? acc[4 * (j0 + j) + 2 * h] * a * w0 + b0 : acc[4 * (j0 + j) + 2 * h] + b0;
        const float v1 = SCALED ? acc[4 * (j0 + j) + 2 * h + 1] * a * w1 + b1 : acc[4 * (j0 + j) + 2 * h + 1] + b1;
        const size_t idx = (size_t)row * N + col;
        if (two && pairs && mode == OUT_F32) {
          *reinterpret_cast<float2*>((float*)out + idx) = make_float2(v0, v1);
        } else if (two && pairs && mode == OUT_BF16) {
          *reinterpret_cast<__nv_bfloat162*>((bf16*)out + idx) = __floats2bfloat162_rn(v0, v1);
        } else if (two && pairs && mode == OUT_F32_ADD) {
          *reinterpret_cast<float2*>((float*)out + idx) = make_float2(old[j][h].x + v0, old[j][h].y + v1);
        } else {
          gh_store(out, mode, idx, v0);
          if (two) gh_store(out, mode, idx + 1, v1);
        }
      }
    }
  }
}

// OUT_SWIGLU's epilogue: accumulator columns 0-127 are gate, 128-255 the up of the same output
// columns (acc[4 j + e] and acc[4 (j + 16) + e]); out (M, hidden) bf16, tile columns col0...
template <bool SCALED = false>
__device__ __forceinline__ void gh_epilogue_swiglu(const float* acc, bf16* out, int M, int hidden, int row0, int col0,
                                                   GhScales sc = {nullptr, nullptr}) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int j = 0; j < GH_BN / 16; j++) {
    const int col = col0 + 8 * j + 2 * q;
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int row = row0 + 16 * warp + g + 8 * h;
      if (row >= M) continue;
      float v[2];
#pragma unroll
      for (int e = 0; e < 2; e++) {
        float g0 = acc[4 * j + 2 * h + e], u0 = acc[4 * (j + 16) + 2 * h + e];
        if (SCALED) {
          g0 *= sc.a[row] * sc.w[col + e];
          u0 *= sc.a[row] * sc.w[hidden + col + e];
        }
        const float gate = bf2f(f2bf(g0)), up = bf2f(f2bf(u0));
        v[e] = gate / (1.f + expf(-gate)) * up;  // swiglu_rows' formula
      }
      *reinterpret_cast<__nv_bfloat162*>(out + (size_t)row * hidden + col) = __floats2bfloat162_rn(v[0], v[1]);
    }
  }
}

extern "C" __global__ void __launch_bounds__(GH_THREADS, 1)
    gemm_sm90(const CUtensorMap* __restrict__ mapA, const CUtensorMap* __restrict__ mapW, void* out,
              const float* bias, int M, int N, int K, int mode, int rowGroup) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char gh_smem[];
  unsigned char* ring = reinterpret_cast<unsigned char*>(((uintptr_t)gh_smem + 1023) & ~(uintptr_t)1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + GH_STAGES * GH_STAGE_BYTES);
  uint64_t* empty = full + GH_STAGES;

  const bool swiglu = mode == OUT_SWIGLU;
  const int hidden = N / 2;  // OUT_SWIGLU's output columns; a tile covers 128 of them
  const int mTiles = (M + GH_BM - 1) / GH_BM, nTiles = swiglu ? hidden / 128 : (N + GH_BN - 1) / GH_BN;
  const int tiles = mTiles * nTiles;
  const int kTiles = (K + GH_BK - 1) / GH_BK;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < GH_STAGES; s++) {
      mbar_init(&full[s], 1);   // the producer's expect_tx arrival (+ the TMA bytes)
      mbar_init(&empty[s], 2);  // one arrival per consumer warpgroup
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    regs_dealloc<40>();
    if (threadIdx.x == 0) {
      tma_prefetch(mapA);
      tma_prefetch(mapW);
      int it = 0;  // k-slices issued so far, over all of this block's tiles: the ring position
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        gh_tile(t, mTiles, nTiles, rowGroup, &tm, &tn);
        for (int kt = 0; kt < kTiles; kt++, it++) {
          const int s = it % GH_STAGES;
          mbar_wait(&empty[s], ((it / GH_STAGES) & 1) ^ 1);
          unsigned char* sa = ring + s * GH_STAGE_BYTES;
          mbar_expect_tx(&full[s], GH_STAGE_BYTES);
          tma_load_2d(sa, mapA, kt * GH_BK, tm * GH_BM, &full[s]);
          if (swiglu) {  // 128 gate rows, then the 128 up rows of the same columns (mapW's box is 128 rows)
            tma_load_2d(sa + GH_A_BYTES, mapW, kt * GH_BK, tn * 128, &full[s]);
            tma_load_2d(sa + GH_A_BYTES + GH_B_BYTES / 2, mapW, kt * GH_BK, hidden + tn * 128, &full[s]);
          } else {
            tma_load_2d(sa + GH_A_BYTES, mapW, kt * GH_BK, tn * GH_BN, &full[s]);
          }
        }
      }
    }
  } else {
    regs_alloc<232>();
    const int c = wg - 1;  // this consumer's 64 rows of the tile
    float acc[GH_BN / 2];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      gh_tile(t, mTiles, nTiles, rowGroup, &tm, &tn);
      for (int kt = 0; kt < kTiles; kt++, it++) {
        const int s = it % GH_STAGES;
        mbar_wait(&full[s], (it / GH_STAGES) & 1);
        const unsigned char* sa = ring + s * GH_STAGE_BYTES + c * 64 * 128;
        const unsigned char* sb = ring + s * GH_STAGE_BYTES + GH_A_BYTES;
        fence_regs<GH_BN / 2>(acc);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < GH_BK / 16; ks++) {  // 16 bf16 = 32 B further along the swizzled rows
          wgmma_ss_n256(acc, sm90_desc(sa + 32 * ks, 16, 1024), sm90_desc(sb + 32 * ks, 16, 1024), kt > 0 || ks > 0);
        }
        wgmma_commit();
        fence_regs<GH_BN / 2>(acc);
        // keep this slice's wgmma in flight; the previous slice's are done, so its stage is free
        wgmma_wait<1>();
        if (kt > 0 && threadIdx.x % 128 == 0) mbar_arrive(&empty[(it - 1) % GH_STAGES]);
      }
      wgmma_wait<0>();
      fence_regs<GH_BN / 2>(acc);
      if (threadIdx.x % 128 == 0) mbar_arrive(&empty[(it - 1) % GH_STAGES]);
      if (swiglu) gh_epilogue_swiglu(acc, (bf16*)out, M, hidden, tm * GH_BM + c * 64, tn * 128);
      else gh_epilogue<GH_BN>(acc, out, bias, M, N, mode, tm * GH_BM + c * 64, tn * GH_BN);
    }
  }
#else
  __trap();  // the engine launches this kernel only on compute capability 9.0
#endif
}
