// Tensor-core list attention for few rows (included by list_attention.cu): decode_attention.cu's
// flash decoding where every key row of a tile comes from its own list slot. Block = (KV head, split
// of the list, query row), 4 warps; the group's query heads are the rows of one 16-row mma tile.
// Latency first (a decode list is ~11 MB, a few microseconds of bandwidth): nothing waits for the
// whole block before the first key loads go out. The queries are copied asynchronously, then each
// warp looks up the slot offsets and biases of its own first LD_STAGES tiles (warp w takes the
// split's 16-entry tiles w, w + 4, ...), issues their cp.async at once, and only then looks up the
// rest of its tiles while those loads fly; LD_STAGES tiles stay in flight per warp, each with its
// own online softmax. Compact keys are rotated in shared memory (bf16 -> f32 -> bf16) before the
// ldmatrix loads. Output in attn_split's partial format; with counters (n, nKv) int (zero between
// launches) the last block of each (row, KV head) to finish also merges the splits into out, as
// attn_combine would, parallel over (head, 4 dims) with 16 splits' loads in flight per thread, and
// resets its counter: one launch instead of two. With counters null the caller runs attn_combine.
#include "attn_tile.cuh"

#define LD_TK 16     // entries per tile (ListKernels.TC_TILE)
#define LD_WARPS 4   // (ListKernels.TC_WARPS)
#define LD_STAGES 2  // tiles in flight per warp (ListKernels.TC_STAGES)
#define LD_MERGE 16  // splits per batch of the fused merge's loads

template <int D, bool COMPACT>
__device__ __forceinline__ void list_decode(bf16* __restrict__ out, int* __restrict__ counters,
                                            float* __restrict__ partO, float* __restrict__ partML,
                                            const bf16* __restrict__ Q, const bf16* __restrict__ K,
                                            const bf16* __restrict__ V, const int* __restrict__ pageTable,
                                            const int* __restrict__ lists, const float* __restrict__ bias,
                                            const float* __restrict__ cosT, const float* __restrict__ sinT,
                                            int nHeads, int nKv, int pageSize, int listLen, int n, int perHead,
                                            int chunk, float scale) {
  constexpr int LD = D + 8, HALF = D / 2, CPR = D / 8;  // CPR: 16-byte pieces per row
  constexpr int TILE = LD_TK * LD;                      // elements of one K or V tile buffer
  constexpr float LOG2E = 1.4426950408889634f;
  extern __shared__ __align__(16) unsigned char ld_smem[];
  bf16* sQ = reinterpret_cast<bf16*>(ld_smem);         // (16, LD) the group's queries, rows >= G zero
  size_t* sOff = reinterpret_cast<size_t*>(sQ + 16 * LD);  // (chunk) element offset of each entry's row
  float* sBias = reinterpret_cast<float*>(sOff + chunk);    // (chunk) bias in log2 units, 0 without
  bf16* sKV = reinterpret_cast<bf16*>(sBias + chunk);       // per warp: LD_STAGES x (K (TK, LD), V (TK, LD))
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kvh = blockIdx.x, split = blockIdx.y, row = blockIdx.z, splits = gridDim.y;
  const int G = nHeads / nKv;
  const int end = listLen - n + row + 1;
  const int ks = split * chunk, ke = min(end, ks + chunk), nk = max(0, ke - ks);
  const int* list = lists + (perHead ? (size_t)kvh * listLen : 0);

  // the queries: asynchronous, in flight with the lookups below (rows >= G zero-filled from a valid address)
  for (int c = tid; c < 16 * CPR; c += LD_WARPS * 32) {
    const int r = c / CPR, col = (c % CPR) * 8;
    const bool ok = r < G;
    cp_async16(sQ + r * LD + col, ok ? Q + ((size_t)row * nHeads + kvh * G + r) * D + col : Q, ok ? 16 : 0);
  }
  cp_async_commit();

  const int nT = (nk + LD_TK - 1) / LD_TK;  // split tile t holds split entries [t * TK, t * TK + TK)
  const int myTiles = warp < nT ? (nT - warp + LD_WARPS - 1) / LD_WARPS : 0;  // the warp's tiles: warp + j * 4
  // entry e of the warp's own numbering (its j-th tile, row e % TK) is split entry warpEntry(e)
  auto warpEntry = [&](int e) { return (warp + (e / LD_TK) * LD_WARPS) * LD_TK + e % LD_TK; };
  // the first LD_STAGES tiles: every lane's list loads first, then the dependent page-table and bias loads
  {
    constexpr int PER = (LD_STAGES * LD_TK + 31) / 32;
    int slot[PER], at[PER];
#pragma unroll
    for (int u = 0; u < PER; u++) {
      const int e = lane + u * 32;
      at[u] = e < LD_STAGES * LD_TK ? warpEntry(e) : nk;
      slot[u] = at[u] < nk ? list[ks + at[u]] : 0;
    }
#pragma unroll
    for (int u = 0; u < PER; u++)
      if (at[u] < nk) {
        sOff[at[u]] = kv_offset(pageTable, slot[u], kvh, nKv, pageSize, D);
        sBias[at[u]] = bias ? bias[(size_t)slot[u] * nKv + kvh] * LOG2E : 0.f;
      }
  }
  __syncwarp();

  bf16* mine = sKV + warp * (LD_STAGES * 2 * TILE);
  auto load = [&](int stage, int t) {  // split tile t into the warp's buffer stage (past the split: zeros)
    bf16* dk = mine + stage * 2 * TILE;
    bf16* dv = dk + TILE;
    for (int c = lane; c < LD_TK * CPR; c += 32) {
      int r = c / CPR, col = (c % CPR) * 8, i = t * LD_TK + r;
      bool ok = i < nk;  // zero-filled (0 * garbage must not be NaN), then masked
      size_t off = ok ? sOff[i] + col : 0;
      cp_async16(dk + r * LD + col, K + off, ok ? 16 : 0);
      cp_async16(dv + r * LD + col, V + off, ok ? 16 : 0);
    }
  };
  // one commit group per stage, empty ones included, so the wait counts below hold for every warp
#pragma unroll
  for (int st = 0; st < LD_STAGES; st++) {
    if (st < myTiles) load(st, warp + st * LD_WARPS);
    cp_async_commit();
  }
  asm volatile("" ::: "memory");  // keep the lookups below (and their waits) after the copies above
  // the rest of the warp's tiles, looked up while the first ones are in flight
  for (int e = LD_STAGES * LD_TK + lane; e < myTiles * LD_TK; e += 32) {
    const int i = warpEntry(e);
    if (i < nk) {
      const int slot = list[ks + i];
      sOff[i] = kv_offset(pageTable, slot, kvh, nKv, pageSize, D);
      sBias[i] = bias ? bias[(size_t)slot * nKv + kvh] * LOG2E : 0.f;
    }
  }
  __syncwarp();
  cp_async_wait<LD_STAGES>();  // this thread's query pieces (the group before the stages')
  __syncthreads();             // everyone's
  unsigned qf[D / 16][4];
  tile_q_frags<D, LD>(qf, sQ, lane);

  float o[D / 8][4], mRow[2], lRow[2];
  tile_init<D>(o, mRow, lRow);
  const float sl2 = scale * LOG2E;
  const int qd = lane & 3;

  for (int it = 0; it < myTiles; it++) {
    const int t = warp + it * LD_WARPS, buf = it % LD_STAGES;
    // compact: RoPE at list position ks + i of rotate-half pairs (j, j + HALF). The table loads are
    // issued before the wait, so their latency hides behind the tile's; all of them, unconditionally
    // (rows past the split are zeros, rotated to zeros; positions clamp inside the table).
    constexpr int RP = COMPACT ? LD_TK * HALF / 32 : 1;  // pairs per lane
    float rc[RP], rs[RP];
    if (COMPACT) {
#pragma unroll
      for (int u = 0; u < RP; u++) {
        const int idx = lane + u * 32, r = idx / HALF, j = idx % HALF;
        const size_t tab = (size_t)min(ks + t * LD_TK + r, listLen - 1) * HALF + j;
        rc[u] = __ldg(cosT + tab);
        rs[u] = __ldg(sinT + tab);
      }
    }
    cp_async_wait<LD_STAGES - 1>();  // tile t's group (LD_STAGES - 1 later ones may still fly)
    __syncwarp();
    bf16* k = mine + buf * 2 * TILE;
    const bf16* v = k + TILE;
    if (COMPACT) {
#pragma unroll
      for (int u = 0; u < RP; u++) {
        const int idx = lane + u * 32, r = idx / HALF, j = idx % HALF;
        const float x1 = bf2f(k[r * LD + j]), x2 = bf2f(k[r * LD + j + HALF]);
        k[r * LD + j] = f2bf(x1 * rc[u] - x2 * rs[u]);
        k[r * LD + j + HALF] = f2bf(x2 * rc[u] + x1 * rs[u]);
      }
      __syncwarp();
    }

    float s[LD_TK / 8][4];
    tile_qk<LD_TK, D, LD>(s, qf, k, lane);
    tile_softmax<LD_TK, D>(s, o, mRow, lRow, [&](int j, int e, float sv) {
      int i = t * LD_TK + j * 8 + qd * 2 + (e & 1);
      return i < nk ? sv * sl2 + sBias[i] : -INFINITY;
    });
    tile_pv<LD_TK, D, LD>(o, s, v, lane);
    __syncwarp();  // every lane is done with this buffer: refill it LD_STAGES tiles on
    if (it + LD_STAGES < myTiles) load(buf, t + LD_STAGES * LD_WARPS);
    cp_async_commit();
  }
  cp_async_wait<0>();
  tile_row_sums(lRow);
  // merge the warps: per warp (16 rows) max and sum, and the (16, D) unnormalised output
  tile_merge_warps<D, LD_WARPS>(sKV, o, mRow, lRow, partO, partML, ((size_t)row * nHeads + kvh * G) * splits + split,
                                G, splits);

  if (counters == nullptr) return;
  // last block of this (row, KV head) merges every split's partials (threadFenceReduction pattern)
  __shared__ int isLast;
  __threadfence();  // this block's partials are visible device-wide before it is counted
  __syncthreads();
  if (tid == 0) isLast = atomicAdd(counters + (size_t)row * nKv + kvh, 1) == splits - 1;
  __syncthreads();
  if (!isLast) return;
  __threadfence();
  // (head r, split sp) of this KV head's partials sits at first + r * splits + sp. A thread per
  // (head, four dims), no block-wide step: it loads LD_MERGE splits' (max, sum) and outputs at once
  // (one L2 round trip per batch, not one per split) and rescales online from batch to batch.
  const size_t first = ((size_t)row * nHeads + kvh * G) * splits;
  for (int idx = tid; idx < G * D / 4; idx += LD_WARPS * 32) {
    const int r = idx / (D / 4), d = (idx % (D / 4)) * 4;
    const float2* ml = reinterpret_cast<const float2*>(partML) + first + (size_t)r * splits;
    const float* po = partO + (first + (size_t)r * splits) * D + d;
    float M = -INFINITY, L = 0.f;  // natural-log max so far, and the sum rescaled to it
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int sp0 = 0; sp0 < splits; sp0 += LD_MERGE) {
      float2 m[LD_MERGE];
      float4 v[LD_MERGE];
#pragma unroll
      for (int u = 0; u < LD_MERGE; u++) {
        const int sp = sp0 + u;
        m[u] = sp < splits ? __ldcg(ml + sp) : make_float2(-INFINITY, 0.f);
        v[u] = sp < splits ? __ldcg(reinterpret_cast<const float4*>(po + (size_t)sp * D)) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
      float Mn = M;
#pragma unroll
      for (int u = 0; u < LD_MERGE; u++) Mn = fmaxf(Mn, m[u].x);
      if (Mn == -INFINITY) continue;  // only empty splits so far
      const float a = M == -INFINITY ? 0.f : __expf(M - Mn);
      acc.x *= a;
      acc.y *= a;
      acc.z *= a;
      acc.w *= a;
      L *= a;
#pragma unroll
      for (int u = 0; u < LD_MERGE; u++) {
        const float w = m[u].x == -INFINITY ? 0.f : __expf(m[u].x - Mn);  // empty splits weigh 0
        acc.x = fmaf(w, v[u].x, acc.x);
        acc.y = fmaf(w, v[u].y, acc.y);
        acc.z = fmaf(w, v[u].z, acc.z);
        acc.w = fmaf(w, v[u].w, acc.w);
        L = fmaf(w, m[u].y, L);
      }
      M = Mn;
    }
    const float inv = L > 0.f ? 1.f / L : 0.f;
    *reinterpret_cast<uint2*>(out + ((size_t)row * nHeads + kvh * G + r) * D + d) =
        make_uint2(pack_bf16(acc.x * inv, acc.y * inv), pack_bf16(acc.z * inv, acc.w * inv));
  }
  if (tid == 0) counters[(size_t)row * nKv + kvh] = 0;  // ready for the next launch
}

// One kernel per head size and key kind: compact adds the table registers the original path does not need.
// At least 3 blocks per multiprocessor: what the shared memory allows at D = 128, so registers must too.
#define LIST_DECODE_KERNEL(NAME, D, COMPACT)                                                                     \
  extern "C" __global__ void __launch_bounds__(LD_WARPS * 32, 3)                                                 \
      NAME(bf16* out, int* counters, float* partO, float* partML, const bf16* Q, const bf16* K, const bf16* V,     \
           const int* pageTable, const int* lists, const float* bias, const float* cosT, const float* sinT,        \
           int nHeads, int nKv, int pageSize, int listLen, int n, int perHead, int chunk, float scale) {          \
    list_decode<D, COMPACT>(out, counters, partO, partML, Q, K, V, pageTable, lists, bias, cosT, sinT, nHeads, nKv, \
                            pageSize, listLen, n, perHead, chunk, scale);                                        \
  }
LIST_DECODE_KERNEL(list_decode_d64, 64, false)
LIST_DECODE_KERNEL(list_decode_d128, 128, false)
LIST_DECODE_KERNEL(list_decode_d64_compact, 64, true)
LIST_DECODE_KERNEL(list_decode_d128_compact, 128, true)
