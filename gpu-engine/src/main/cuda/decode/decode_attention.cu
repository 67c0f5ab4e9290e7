// Decode attention on tensor cores (flash decoding): the G query heads that share a KV head are the
// rows of one 16-row mma tile, so every key and value is read once per KV head and the dot products
// cost almost nothing next to the bytes. Block = (KV head, split of the key range, query row), 4
// warps; warp w takes the split's 32-key tiles w, w + 4, ..., streams each through its own double
// buffer with cp.async and keeps its own online softmax; the warps merge in shared memory and the
// block writes the split's unnormalised partial output and (max, sum) in attn_split's format, so
// attn_combine finishes the job. Keys as in prefill_attention.cu: paged (page, nKv, 64, headDim) bf16,
// rotated; bias (slots, nHeads) f32 or null (per query head) is added to the logits; row i sees slots
// [max(0, before + i + 1 - window), before + i + 1). CPU twin:
// cpu/policy/DenseAttention.
//
// flash_decode_rows_*: the same kernel for one row of each of several sequences (a batched decode
// step), each in its own cache; what changes per step (slot, chunk, page table, pool) comes from the
// step's DecodeRow records in device memory, so a CUDA graph replays it. The grid's split count is
// the most Kernels.decodePlan ever gives; a row's splits beyond its own are empty (max -inf) and
// attn_combine weighs them 0, so a row's result is bit for bit that of flash_decode_* on it alone.
#include "../common/attn_tile.cuh"
#include "../common/decode_row.cuh"

#define FD_TK 32       // keys per tile
#define FD_PAGE 64     // page size the kernel assumes (Kernels.PAGE_SIZE)
#define FD_WARPS 4

template <int D>
__device__ __forceinline__ void flash_decode(float* __restrict__ partO, float* __restrict__ partML,
                                             const bf16* __restrict__ Q, const bf16* __restrict__ K,
                                             const bf16* __restrict__ V, const int* __restrict__ pageTable,
                                             int nHeads, int nKv, int end, int window, int chunk, float scale,
                                             const float* __restrict__ bias) {
  constexpr int LD = D + 8;
  extern __shared__ __align__(16) unsigned char fd_smem[];
  bf16* sQ = reinterpret_cast<bf16*>(fd_smem);  // (16, LD) the group's queries, rows >= G zero
  bf16* sKV = sQ + 16 * LD;                     // per warp: 2 stages x (K (TK, LD), V (TK, LD))
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kvh = blockIdx.x, split = blockIdx.y, row = blockIdx.z, splits = gridDim.y;
  const int G = nHeads / nKv;
  const int start = window > 0 ? max(0, end - window) : 0;
  const int ks = start + split * chunk, ke = min(end, ks + chunk);

  for (int c = tid; c < 16 * D / 8; c += FD_WARPS * 32) {
    int r = c / (D / 8), col = (c % (D / 8)) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < G) v = *reinterpret_cast<const uint4*>(Q + ((size_t)row * nHeads + kvh * G + r) * D + col);
    *reinterpret_cast<uint4*>(sQ + r * LD + col) = v;
  }
  __syncthreads();
  unsigned qf[D / 16][4];
  tile_q_frags<D, LD>(qf, sQ, lane);

  bf16* mine = sKV + warp * (2 * 2 * FD_TK * LD);
  const int t0 = ks / FD_TK;
  const int nT = ks < ke ? (ke - 1) / FD_TK - t0 + 1 : 0;
  auto load = [&](int stage, int t) {
    const int key0 = t * FD_TK;
    const int page = pageTable[key0 / FD_PAGE];
    const size_t off = (((size_t)page * nKv + kvh) * FD_PAGE + key0 % FD_PAGE) * D;
    bf16* dk = mine + stage * 2 * FD_TK * LD;
    bf16* dv = dk + FD_TK * LD;
    for (int c = lane; c < FD_TK * D / 8; c += 32) {
      int r = c / (D / 8), col = (c % (D / 8)) * 8;
      bool ok = key0 + r >= ks && key0 + r < ke;  // outside the split: zero-filled, then masked
      cp_async16(dk + r * LD + col, ok ? (const void*)(K + off + r * D + col) : (const void*)K, ok ? 16 : 0);
      cp_async16(dv + r * LD + col, ok ? (const void*)(V + off + r * D + col) : (const void*)V, ok ? 16 : 0);
    }
  };

  float o[D / 8][4], mRow[2], lRow[2];
  tile_init<D>(o, mRow, lRow);
  const float sl2 = scale * 1.4426950408889634f;
  const int qd = lane & 3;

  if (warp < nT) load(0, t0 + warp);
  cp_async_commit();
  int it = 0;
  for (int i = warp; i < nT; i += FD_WARPS, it++) {
    const int buf = it & 1;
    if (i + FD_WARPS < nT) load(buf ^ 1, t0 + i + FD_WARPS);
    cp_async_commit();
    cp_async_wait<1>();
    __syncwarp();
    const bf16* k = mine + buf * 2 * FD_TK * LD;
    const bf16* v = k + FD_TK * LD;

    float s[FD_TK / 8][4];
    tile_qk<FD_TK, D, LD>(s, qf, k, lane);
    const int tileKey = (t0 + i) * FD_TK;
    tile_softmax<FD_TK, D>(s, o, mRow, lRow, [&](int j, int e, float sv) {
      int key = tileKey + j * 8 + qd * 2 + (e & 1);
      float x = -INFINITY;
      if (key >= ks && key < ke) {
        x = sv * sl2;
        // SelKV's logit bias of (slot, query head), in log2 units as x; tile row r = (lane >> 2) + 8 (e >> 1)
        // is query head kvh * G + r (rows >= G are padding)
        const int r = (lane >> 2) + ((e >> 1) << 3);
        if (bias && r < G) x += bias[(size_t)key * nHeads + kvh * G + r] * 1.4426950408889634f;
      }
      return x;
    });
    tile_pv<FD_TK, D, LD>(o, s, v, lane);
    __syncwarp();  // this buffer is refilled by the prefetch two tiles on
  }
  cp_async_wait<0>();
  tile_row_sums(lRow);
  // merge the warps: per warp (16 rows) max and sum, and the (16, D) unnormalised output
  tile_merge_warps<D, FD_WARPS>(sKV, o, mRow, lRow, partO, partML, ((size_t)row * nHeads + kvh * G) * splits + split,
                                G, splits);
}

extern "C" __global__ void __launch_bounds__(FD_WARPS * 32)
    flash_decode_d64(float* partO, float* partML, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable,
                     int nHeads, int nKv, int before, int window, int chunk, float scale, const float* bias) {
  flash_decode<64>(partO, partML, Q, K, V, pageTable, nHeads, nKv, before + blockIdx.z + 1, window, chunk, scale, bias);
}
extern "C" __global__ void __launch_bounds__(FD_WARPS * 32)
    flash_decode_d128(float* partO, float* partML, const bf16* Q, const bf16* K, const bf16* V, const int* pageTable,
                      int nHeads, int nKv, int before, int window, int chunk, float scale, const float* bias) {
  flash_decode<128>(partO, partML, Q, K, V, pageTable, nHeads, nKv, before + blockIdx.z + 1, window, chunk, scale,
                    bias);
}

// Q (rows, nHeads, D) bf16: row b is sequence b's one query of the step, attending its slots
// [.., rows[b].slot + 1) of layer `layer`; partials as above (rows, nHeads, gridDim.y, D).
template <int D>
__device__ __forceinline__ void flash_decode_row(float* partO, float* partML, const bf16* Q,
                                                 const DecodeRow* __restrict__ rows, int layer, int nHeads, int nKv,
                                                 int window, float scale) {
  const DecodeRow r = rows[blockIdx.z];
  const size_t at = (size_t)layer * r.layerElems;
  flash_decode<D>(partO, partML, Q, r.kRope + at, r.v + at, r.pageTable, nHeads, nKv, r.slot + 1, window, r.chunk,
                  scale, nullptr);
}
extern "C" __global__ void __launch_bounds__(FD_WARPS * 32)
    flash_decode_rows_d64(float* partO, float* partML, const bf16* Q, const DecodeRow* rows, int layer, int nHeads,
                          int nKv, int window, float scale) {
  flash_decode_row<64>(partO, partML, Q, rows, layer, nHeads, nKv, window, scale);
}
extern "C" __global__ void __launch_bounds__(FD_WARPS * 32)
    flash_decode_rows_d128(float* partO, float* partML, const bf16* Q, const DecodeRow* rows, int layer, int nHeads,
                           int nKv, int window, float scale) {
  flash_decode_row<128>(partO, partML, Q, rows, layer, nHeads, nKv, window, scale);
}
