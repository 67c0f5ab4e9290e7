// Hopper (sm_90a) building blocks shared by the wgmma kernels: mbarriers, TMA tile loads, the
// shared-memory matrix descriptor, wgmma fences and register re-allocation. Everything here
// compiles to nothing on other architectures (the kernels that use it check
// __CUDA_ARCH_FEAT_SM90_ALL and trap elsewhere), so the one fatbin still builds for sm_80..89.
//
// Conventions: shared-memory tiles are written by TMA with the 128-byte swizzle, rows of 64 bf16
// (128 B), 8-row groups of 1024 B, each tile 1024-byte aligned; wgmma reads them through
// descriptors of the same swizzle (sm90_desc). The host side builds the tensor maps
// (io.longsieve.cuda.TensorMaps) with box inner dimension 64 elements and hands them to the kernels
// in device memory: a map passed by value (__grid_constant__) faulted when launched through JCuda.
#pragma once
#include <cuda.h>  // CUtensorMap (the struct only; no driver call is made from device code)
#include <stdint.h>

#include "wgmma_ops.cuh"

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// --- mbarriers -------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}

// Makes the initialised barriers visible to the async proxy (TMA) before first use.
__device__ __forceinline__ void mbar_fence_init() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// The producer's arrival that also announces how many bytes TMA will deliver to this phase.
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// Waits until the phase of the given parity has completed. A fresh barrier counts as having just
// completed phase 1, so a producer waiting on "empty" slots starts with parity 1 and passes.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}

// --- TMA -------------------------------------------------------------------------------------

// One box of a 2-D tensor map (coordinates innermost first, in elements) into shared memory,
// completing on bar's transaction count.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          smem_u32(dst)),
      "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
#endif
}

__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          smem_u32(dst)),
      "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
#endif
}

// Brings the tensor map (a kernel parameter) into the descriptor cache before the first load.
__device__ __forceinline__ void tma_prefetch(const CUtensorMap* map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)map) : "memory");
#endif
}

// --- wgmma -----------------------------------------------------------------------------------

// Shared-memory matrix descriptor for a 128-byte-swizzled operand: start address, leading and
// stride byte offsets (both >> 4), swizzle mode 1 (128 B) in bits 62-63. K-major operands: lbo is
// unused (16), sbo = 1024 (from one 8-row group to the next). MN-major operands (transposed B):
// lbo = bytes from one 64-element column block to the next, sbo = 1024 (8 K-rows).
__device__ __forceinline__ uint64_t sm90_desc(const void* smem, uint32_t lbo, uint32_t sbo) {
  uint64_t addr = smem_u32(smem);
  return ((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}

// Orders this thread's register and shared-memory accesses before the warpgroup's next wgmma.
__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N committed wgmma groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Pins registers that a wgmma still in flight reads or writes: the compiler sees them used here,
// so it neither moves nor reuses them between the wgmma's issue and its wait (CUTLASS calls this
// fencing the operands).
template <int N>
__device__ __forceinline__ void fence_regs(float* r) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t* r) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+r"(r[i])::"memory");
}

// --- warp specialisation ---------------------------------------------------------------------

// Register re-allocation between warpgroups (needs __launch_bounds__(threads, 1)): producers give
// registers back, consumers take them for their accumulators.
template <int REGS>
__device__ __forceinline__ void regs_dealloc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
#endif
}
template <int REGS>
__device__ __forceinline__ void regs_alloc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
#endif
}

// Named barrier among `threads` threads (warpgroups taking turns on the tensor cores).
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
