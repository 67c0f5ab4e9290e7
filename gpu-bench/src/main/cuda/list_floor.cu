// The gather floor of list attention (issue 5's 25x target; ListFloor.java): the bytes list_decode.cu
// reads, read the same way (list entry -> page table -> the K and V rows of each KV head, 16-byte
// cp.async.cg copies into shared memory), with no attention maths and no split merge. Its time over a
// cold list bounds from below what a list-attention kernel of that access pattern can take; the bench
// sweeps its grid for the least.
// Block (g, b) of grid (nKv, blocks) takes entries [b * chunk, min(listLen, b * chunk + chunk)) of list 0
// (every KV head reads the one list, as TokenSelect's shared lists). First every list entry, then every
// page-table entry (independent loads, LF_LOOKUPS per thread per round: one round where the block has at
// most LF_LOOKUPS * threads entries), the row offsets staged in shared memory; then every 16-byte piece
// of the rows, `stage` pieces per round (one round where the chunk's rows fit the stage, ListFloor.stage),
// all of a round's copies issued before one wait. Copies into shared memory rather than registers: they
// hold no registers, so a round's loads are all in flight whatever the compiler schedules (register
// loads it interleaved with their sums, each sum waiting for its load, on sm_90). Each thread then sums
// (mod 2^32) every u32 word it copied, the block sums the threads, and out[g * blocks + b] gets that sum:
// no copy can be dropped. Empty blocks (b * chunk >= listLen) write 0. pageTable null: the list holds
// physical slots (page p's slots p * pageSize ..), the page-table lookup skipped, as if the top-k wrote
// them: the floor of one dependent lookup fewer.
#include "common/common.cuh"  // gpu-engine/src/main/cuda/common (build-bench-fatbin.sh passes -I)

#define LF_LOOKUPS 4       // list (and page-table) entries per thread per round of lookups
#define LF_ISSUE 8         // row copies a thread issues back to back
#define LF_MAX_THREADS 512

// Shared memory (ListFloor.smem): sOff (chunk) size_t, then from the next 16-byte boundary the stage (stage, 16
// bytes) of copied pieces.
template <int D>
__device__ __forceinline__ void list_gather_floor(unsigned* __restrict__ out, const bf16* __restrict__ K,
                                                  const bf16* __restrict__ V, const int* __restrict__ pageTable,
                                                  const int* __restrict__ lists, int nKv, int pageSize, int listLen,
                                                  int chunk, int stage) {
  constexpr int CPR = D / 8;    // 16-byte pieces per row
  constexpr int PPE = 2 * CPR;  // pieces per entry: its K row's, then its V row's
  extern __shared__ __align__(16) unsigned char lf_smem[];
  size_t* sOff = reinterpret_cast<size_t*>(lf_smem);       // (chunk) element offset of each entry's rows
  uint4* sRow = reinterpret_cast<uint4*>(lf_smem + ((size_t)chunk * 8 + 15) / 16 * 16);  // (stage) copied pieces
  __shared__ unsigned red[LF_MAX_THREADS / 32];
  const int tid = threadIdx.x, T = blockDim.x, g = blockIdx.x, b = blockIdx.y;
  const int ks = b * chunk, nk = max(0, min(listLen, ks + chunk) - ks);

  // lookups: a round's list entries, then their page-table entries. The loads are unconditional, at a clamped
  // index (nk > 0 inside the loop), so they issue together instead of each behind a branch; only the stores
  // are conditional.
  for (int base = 0; base < nk; base += LF_LOOKUPS * T) {
    int slot[LF_LOOKUPS];
    size_t off[LF_LOOKUPS];
#pragma unroll
    for (int u = 0; u < LF_LOOKUPS; u++) slot[u] = lists[ks + min(base + tid + u * T, nk - 1)];
#pragma unroll
    for (int u = 0; u < LF_LOOKUPS; u++)
      off[u] = pageTable ? kv_offset(pageTable, slot[u], g, nKv, pageSize, D)
                         : (((size_t)(slot[u] / pageSize) * nKv + g) * pageSize + slot[u] % pageSize) * D;
#pragma unroll
    for (int u = 0; u < LF_LOOKUPS; u++)
      if (base + tid + u * T < nk) sOff[base + tid + u * T] = off[u];
  }
  __syncthreads();

  // rows: piece p is entry p / PPE, of its K row (p % PPE < CPR) or its V row, at 8 * (p % CPR) elements;
  // consecutive threads copy consecutive pieces of a row (coalesced). Piece p of a round lands in sRow[p - base]:
  // a thread's slots are the same every round, so it reuses them without waiting for the others.
  const int total = nk * PPE;
  unsigned acc = 0;
  for (int base = 0; base < total; base += stage) {
    const int end = min(total, base + stage);
    // LF_ISSUE copies at a time: their offsets first (clamped index, no branch), then the copies, so the
    // shared-memory reads of the offsets do not each stand between two copies
    for (int p0 = base + tid; p0 < end; p0 += LF_ISSUE * T) {
      const bf16* src[LF_ISSUE];
#pragma unroll
      for (int u = 0; u < LF_ISSUE; u++) {
        const int p = min(p0 + u * T, end - 1), e = p / PPE, r = p % PPE;
        src[u] = (r < CPR ? K : V) + sOff[e] + (r % CPR) * 8;
      }
#pragma unroll
      for (int u = 0; u < LF_ISSUE; u++)
        if (p0 + u * T < end) cp_async16(sRow + (p0 + u * T - base), src[u], 16);
    }
    cp_async_commit();
    cp_async_wait<0>();  // this thread's copies of the round (the only slots it reads)
    for (int p = base + tid; p < end; p += T) {
      const uint4 x = sRow[p - base];
      acc += x.x + x.y + x.z + x.w;
    }
  }

  // block sum (blockDim.x a multiple of 32, at most LF_MAX_THREADS)
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((tid & 31) == 0) red[tid >> 5] = acc;
  __syncthreads();
  if (tid == 0) {
    unsigned s = 0;
    for (int w = 0; w < T / 32; w++) s += red[w];
    out[(size_t)g * gridDim.y + b] = s;
  }
}

#define LIST_GATHER_FLOOR_KERNEL(NAME, D)                                                                        \
  extern "C" __global__ void __launch_bounds__(LF_MAX_THREADS)                                                  \
      NAME(unsigned* out, const bf16* K, const bf16* V, const int* pageTable, const int* lists, int nKv,          \
           int pageSize, int listLen, int chunk, int stage) {                                                     \
    list_gather_floor<D>(out, K, V, pageTable, lists, nKv, pageSize, listLen, chunk, stage);                     \
  }
LIST_GATHER_FLOOR_KERNEL(list_gather_floor_d64, 64)
LIST_GATHER_FLOOR_KERNEL(list_gather_floor_d128, 128)
