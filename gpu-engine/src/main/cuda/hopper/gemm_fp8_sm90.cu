// FP8 prefill matrix products on Hopper (sm_90a): C (M, N) = A8 (M, K) . W8 (N, K)^T with the scales of
// both (+ bias), float8_e4m3 operands with K contiguous, wgmma m64nNk32 e4m3 into f32 accumulators.
// Included by hopper.cu after gemm_sm90.cu, whose tile raster (gh_tile) and epilogues it reuses.
//
//   gemm_fp8_sm90: one scale per row of A (per token, or one per tensor repeated) and one per row of W
//     (per channel, or per tensor repeated): gemm_sm90's persistent warp-specialised kernel with the same
//     ring (4 stages of a 128 x 128-byte A tile and a 256 x 128-byte W tile, 128-byte swizzle), 128 e4m3
//     of K per stage instead of 64 bf16, four k32 wgmmas per stage; gemm_sm90's epilogue multiplies each
//     sum by aScale[row] * wScale[col] (GhScales) and writes as it does (bias, f32 / f32 += / bf16, or
//     the fused SwiGLU of OUT_SWIGLU, W's rows [gate | up] and wScale's the same).
//   gemm_fp8_block_sm90: 128 x 128 weight blocks with activations per token and 128-column group (the
//     DeepSeek-V3 scheme of the transformers fp8 format and compressed-tensors' FP8_BLOCK): 128 x 128
//     output tiles, 6 stages. A 128-wide K slice is one scale block, so each consumer sums its slice
//     into a scratch accumulator (wgmma, then wait) and folds it into the tile's sums times
//     aScale[row][kb] * wScale[tile][kb] (DeepGEMM's promotion; it also keeps each f32 partial sum to
//     128 products). No fused SwiGLU: the host runs the gate/up product to bf16 and swiglu_rows.
// Scales are f32: aScale (M) or (M, KB) and wScale (N) or (N / 128, KB), KB = ceil(K / 128). Edges as
// gemm_sm90: TMA zero-fills past M, N and K (a zero byte is e4m3 +0), the epilogue masks the stores;
// K must be a multiple of 16 (16-byte rows for TMA). Quantized activations come from quant_fp8_rows /
// quant_fp8_groups (fp8/fp8.cu). CPU twin: CpuOps.matmul over the dequantized operands
// (Fp8ParityTest, which also checks against the unquantized activations within FP8's tolerance).
#define GF_BM 128
#define GF_BN 256
#define GF_BK 128
#define GF_STAGES 4
#define GF_A_BYTES (GF_BM * GF_BK)
#define GF_B_BYTES (GF_BN * GF_BK)
#define GF_STAGE_BYTES (GF_A_BYTES + GF_B_BYTES)
#define GF_SMEM (GF_STAGES * GF_STAGE_BYTES + 1024 + 2 * GF_STAGES * 8)
#define GFB_BN 128
#define GFB_STAGES 6
#define GFB_STAGE_BYTES (GF_A_BYTES + GFB_BN * GF_BK)
#define GFB_SMEM (GFB_STAGES * GFB_STAGE_BYTES + 1024 + 2 * GFB_STAGES * 8)

extern "C" __global__ void __launch_bounds__(GH_THREADS, 1)
    gemm_fp8_sm90(const CUtensorMap* __restrict__ mapA, const CUtensorMap* __restrict__ mapW, void* out,
                  const float* __restrict__ aScale, const float* __restrict__ wScale, const float* bias, int M, int N,
                  int K, int mode, int rowGroup) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char gf_smem[];
  unsigned char* ring = reinterpret_cast<unsigned char*>(((uintptr_t)gf_smem + 1023) & ~(uintptr_t)1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + GF_STAGES * GF_STAGE_BYTES);
  uint64_t* empty = full + GF_STAGES;

  const bool swiglu = mode == OUT_SWIGLU;
  const int hidden = N / 2;
  const int mTiles = (M + GF_BM - 1) / GF_BM, nTiles = swiglu ? hidden / 128 : (N + GF_BN - 1) / GF_BN;
  const int tiles = mTiles * nTiles;
  const int kTiles = (K + GF_BK - 1) / GF_BK;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < GF_STAGES; s++) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 2);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    regs_dealloc<40>();
    if (threadIdx.x == 0) {
      tma_prefetch(mapA);
      tma_prefetch(mapW);
      int it = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        gh_tile(t, mTiles, nTiles, rowGroup, &tm, &tn);
        for (int kt = 0; kt < kTiles; kt++, it++) {
          const int s = it % GF_STAGES;
          mbar_wait(&empty[s], ((it / GF_STAGES) & 1) ^ 1);
          unsigned char* sa = ring + s * GF_STAGE_BYTES;
          mbar_expect_tx(&full[s], GF_STAGE_BYTES);
          tma_load_2d(sa, mapA, kt * GF_BK, tm * GF_BM, &full[s]);
          if (swiglu) {
            tma_load_2d(sa + GF_A_BYTES, mapW, kt * GF_BK, tn * 128, &full[s]);
            tma_load_2d(sa + GF_A_BYTES + GF_B_BYTES / 2, mapW, kt * GF_BK, hidden + tn * 128, &full[s]);
          } else {
            tma_load_2d(sa + GF_A_BYTES, mapW, kt * GF_BK, tn * GF_BN, &full[s]);
          }
        }
      }
    }
  } else {
    regs_alloc<232>();
    const int c = wg - 1;
    float acc[GF_BN / 2];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      gh_tile(t, mTiles, nTiles, rowGroup, &tm, &tn);
      for (int kt = 0; kt < kTiles; kt++, it++) {
        const int s = it % GF_STAGES;
        mbar_wait(&full[s], (it / GF_STAGES) & 1);
        const unsigned char* sa = ring + s * GF_STAGE_BYTES + c * 64 * GF_BK;
        const unsigned char* sb = ring + s * GF_STAGE_BYTES + GF_A_BYTES;
        fence_regs<GF_BN / 2>(acc);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < GF_BK / 32; ks++) {  // 32 e4m3 = 32 B further along the swizzled rows
          wgmma_ss_e4m3_n256(acc, sm90_desc(sa + 32 * ks, 16, 1024), sm90_desc(sb + 32 * ks, 16, 1024),
                             kt > 0 || ks > 0);
        }
        wgmma_commit();
        fence_regs<GF_BN / 2>(acc);
        wgmma_wait<1>();
        if (kt > 0 && threadIdx.x % 128 == 0) mbar_arrive(&empty[(it - 1) % GF_STAGES]);
      }
      wgmma_wait<0>();
      fence_regs<GF_BN / 2>(acc);
      if (threadIdx.x % 128 == 0) mbar_arrive(&empty[(it - 1) % GF_STAGES]);
      const int row0 = tm * GF_BM + c * 64;
      if (swiglu) gh_epilogue_swiglu<true>(acc, (bf16*)out, M, hidden, row0, tn * 128, GhScales{aScale, wScale});
      else gh_epilogue<GF_BN, true>(acc, out, bias, M, N, mode, row0, tn * GF_BN, GhScales{aScale, wScale});
    }
  }
#else
  __trap();  // the engine launches this kernel only on compute capability 9.0
#endif
}

extern "C" __global__ void __launch_bounds__(GH_THREADS, 1)
    gemm_fp8_block_sm90(const CUtensorMap* __restrict__ mapA, const CUtensorMap* __restrict__ mapW, void* out,
                        const float* __restrict__ aScale, const float* __restrict__ wScale, const float* bias, int M,
                        int N, int K, int mode, int rowGroup) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char gfb_smem[];
  unsigned char* ring = reinterpret_cast<unsigned char*>(((uintptr_t)gfb_smem + 1023) & ~(uintptr_t)1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + GFB_STAGES * GFB_STAGE_BYTES);
  uint64_t* empty = full + GFB_STAGES;

  const int mTiles = (M + GF_BM - 1) / GF_BM, nTiles = (N + GFB_BN - 1) / GFB_BN;
  const int tiles = mTiles * nTiles;
  const int kTiles = (K + GF_BK - 1) / GF_BK;  // = KB, the scale grids' column count
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < GFB_STAGES; s++) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 2);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    regs_dealloc<40>();
    if (threadIdx.x == 0) {
      tma_prefetch(mapA);
      tma_prefetch(mapW);
      int it = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        gh_tile(t, mTiles, nTiles, rowGroup, &tm, &tn);
        for (int kt = 0; kt < kTiles; kt++, it++) {
          const int s = it % GFB_STAGES;
          mbar_wait(&empty[s], ((it / GFB_STAGES) & 1) ^ 1);
          unsigned char* sa = ring + s * GFB_STAGE_BYTES;
          mbar_expect_tx(&full[s], GFB_STAGE_BYTES);
          tma_load_2d(sa, mapA, kt * GF_BK, tm * GF_BM, &full[s]);
          tma_load_2d(sa + GF_A_BYTES, mapW, kt * GF_BK, tn * GFB_BN, &full[s]);
        }
      }
    }
  } else {
    regs_alloc<232>();
    const int c = wg - 1;
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, g = lane >> 2;
    float acc[GFB_BN / 2], part[GFB_BN / 2];
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      gh_tile(t, mTiles, nTiles, rowGroup, &tm, &tn);
      const int row0 = tm * GF_BM + c * 64;
      const int rowA = row0 + 16 * warp + g, rowB = rowA + 8;
#pragma unroll
      for (int i = 0; i < GFB_BN / 2; i++) acc[i] = 0.f;
      for (int kt = 0; kt < kTiles; kt++, it++) {
        const int s = it % GFB_STAGES;
        mbar_wait(&full[s], (it / GFB_STAGES) & 1);
        const unsigned char* sa = ring + s * GFB_STAGE_BYTES + c * 64 * GF_BK;
        const unsigned char* sb = ring + s * GFB_STAGE_BYTES + GF_A_BYTES;
        fence_regs<GFB_BN / 2>(part);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < GF_BK / 32; ks++) {
          wgmma_ss_e4m3_n128(part, sm90_desc(sa + 32 * ks, 16, 1024), sm90_desc(sb + 32 * ks, 16, 1024), ks > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs<GFB_BN / 2>(part);
        if (threadIdx.x % 128 == 0) mbar_arrive(&empty[s]);  // the slice is in registers: free the stage
        const float ws = wScale[(size_t)tn * kTiles + kt];
        const float s0 = rowA < M ? aScale[(size_t)rowA * kTiles + kt] * ws : 0.f;
        const float s1 = rowB < M ? aScale[(size_t)rowB * kTiles + kt] * ws : 0.f;
#pragma unroll
        for (int j = 0; j < GFB_BN / 8; j++) {
          acc[4 * j] += part[4 * j] * s0;
          acc[4 * j + 1] += part[4 * j + 1] * s0;
          acc[4 * j + 2] += part[4 * j + 2] * s1;
          acc[4 * j + 3] += part[4 * j + 3] * s1;
        }
      }
      gh_epilogue<GFB_BN>(acc, out, bias, M, N, mode, row0, tn * GFB_BN);
    }
  }
#else
  __trap();
#endif
}
