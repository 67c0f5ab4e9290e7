// Tensor-core list attention for few rows (included by list_attention.cu): decode_attention.cu's
// flash decoding where every key row of a tile comes from its own list slot. Block = (KV head, split
// of the list, query row), 4 warps; the group's query heads are the rows of one 16-row mma tile.
// Latency first: a decode list is ~11 MB whose rows come cold from HBM, a few microseconds of
// bandwidth, so every load of the list should be in flight at once. ListKernels.plan sizes the split
// so that (where the list allows) each warp's tiles all fit its `stages` buffers and every block is
// resident: one round of loads, no tile waits for another's compute. Warp w takes the split's
// 16-entry tiles w, w + 4, ...; it looks up the slot offsets (list -> page table: independent loads
// for all of its buffered tiles, then one wait), issues every buffered tile's cp.async,
// and only then looks up its later tiles (long lists: a pipeline of `stages` tiles). Each warp keeps
// its own online softmax. Compact keys are rotated at their list positions in registers, on the mma
// fragments (dimension j and j + D/2 sit in the same register of k-steps kk and kk + D/32), and each
// lane computes the cos/sin of exactly the (key row, dimension) pairs of its own fragment registers
// from invFreq (ld_rope_cs): every pair of a tile once, as a table of the tile's rows would, but no
// shared memory (a compact tile buffer is an original one, so compact keys get the same plan: at d128
// two buffers per warp, not one beside 8 KB of cos/sin rows per buffer). The first LD_PRE k-steps' pairs
// are computed before the wait for the tile (their MUFU work in the shadow of its loads: all of d64's,
// half of d128's, what the registers allow), the others just before they are rotated. Reading the rows
// from the RoPE tables instead cost as many bytes as the K and V rows, 8x over from L2. Output in attn_split's
// partial format; with counters (n, nKv) int (zero between launches) the last block of each
// (row, KV head) to finish also merges the splits into out, as attn_combine would, and resets its
// counter: one launch instead of two. With counters null the caller runs attn_combine.
#include "../common/attn_tile.cuh"
#include "../common/attn_merge.cuh"  // merge_splits4

#define LD_TK 16          // entries per tile (ListKernels.TC_TILE)
#define LD_WARPS 4        // (ListKernels.TC_WARPS)
#define LD_MAX_STAGES 3   // tile buffers per warp at most (ListKernels.TC_MAX_STAGES)
// Compact keys: k-steps whose cos/sin a lane computes before it waits for the tile (in registers, 16 per
// k-step): 2 of d128's 4 keeps the kernel at 168 registers on sm_90 (1: 164, 0: 162), no spills.
#define LD_PRE 2
// Splits per batch of the fused merge's loads, one L2 round trip per batch: the decode plan's 21 splits
// (Llama-3.1-8B, 2688 entries, original or compact keys) take 1. 16 before sm_90, where ptxas spilled a few
// bytes of the d128 compact kernel at 21 while its tile loop read cos/sin tables (sm_90 spilled at 24).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define LD_MERGE 16
#else
#define LD_MERGE 21
#endif

// Waits until at most n of this thread's cp.async groups are pending (n > 3 waits for more: still correct).
__device__ __forceinline__ void ld_wait_pending(int n) {
  if (n <= 0) cp_async_wait<0>();
  else if (n == 1) cp_async_wait<1>();
  else if (n == 2) cp_async_wait<2>();
  else cp_async_wait<3>();
}

// cos and sin of the RoPE angle of position pos (an integer, exact in f32 below 2^24) at inverse frequency
// invf. The angle is model/Rope's f32 product, exactly as rope_cs; its cos/sin differ from rope_cs's
// correctly rounded ones by ~1e-6 at most (two-constant Cody-Waite reduction to [-pi, pi]: <= 3e-7 for
// angles < 2^20; sin.approx / cos.approx there: <= 2^-20.5), far below the bf16 rounding of the rotated
// key (2^-9 relative), at six FP32 instructions and two MUFU ops instead of rope_cs's double-precision
// sincos. k is rounded by adding and subtracting 1.5 * 2^23 (two FMA-pipe instructions) rather than by
// rintf (FRND, a conversion-class instruction: lower throughput, and the MUFU ops already bound this):
// the same nearest integer for angles below 2^22 * 2 pi but where the product a / 2 pi is within an ulp
// of a tie, and there its neighbour, which leaves r a hair outside [-pi, pi]: as accurate.
__device__ __forceinline__ void ld_rope_cs(float pos, float invf, float* c, float* s) {
  const float a = __fmul_rn(pos, invf);                                             // the angle, as rope_cs
  const float k = __fsub_rn(__fmaf_rn(a, 0.159154943091895336f, 12582912.f), 12582912.f);  // a = k 2 pi + r
  float r = fmaf(-k, 6.28318548202514648f, a);                                      // float(2 pi)
  r = fmaf(-k, -1.74845560007444870e-07f, r);                                       // 2 pi - float(2 pi)
  __sincosf(r, s, c);
}

// 4-byte asynchronous global->shared copy (cp_async16 needs 16-byte aligned sources).
__device__ __forceinline__ void ld_cp_async4(void* smem, const void* gmem) {
  unsigned d = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(gmem));
}

// Shared memory (ListKernels.tcSmem): sQ (16, D + 8) bf16; compact only, sInv (D / 2) f32 the inverse
// frequencies; sOff (chunk) size_t; sSlot (chunk) int, the entries' slots (SelKV's bias is per slot and query
// head: read in the softmax, where the tile row gives the head); then per warp `stages` buffers of K (16, D + 8)
// bf16 and V (16, D + 8) bf16.
template <int D, bool COMPACT>
__device__ __forceinline__ void list_decode(bf16* __restrict__ out, int* __restrict__ counters,
                                            float* __restrict__ partO, float* __restrict__ partML,
                                            const bf16* __restrict__ Q, const bf16* __restrict__ K,
                                            const bf16* __restrict__ V, const int* __restrict__ pageTable,
                                            const int* __restrict__ lists, const float* __restrict__ bias,
                                            const float* __restrict__ invFreq, int nHeads, int nKv, int pageSize,
                                            int listLen, int n, int perHead, int chunk, int stages, float scale) {
  constexpr int LD = D + 8, HALF = D / 2, CPR = D / 8;  // CPR: 16-byte pieces per row
  constexpr int TILE = LD_TK * LD;                      // elements of one K or V tile buffer
  constexpr int STAGE = TILE * 2 * 2;                   // bytes of one warp's tile buffer (K and V)
  constexpr int SO = D + 8;                             // row stride of the warps' merge (conflict-free float2)
  constexpr float LOG2E = 1.4426950408889634f;
  extern __shared__ __align__(16) unsigned char ld_smem[];
  bf16* sQ = reinterpret_cast<bf16*>(ld_smem);         // (16, LD) the group's queries, rows >= G zero
  float* sInv = reinterpret_cast<float*>(sQ + 16 * LD);                   // (HALF) inverse frequencies, compact
  size_t* sOff = reinterpret_cast<size_t*>(sInv + (COMPACT ? HALF : 0));  // (chunk) element offset of each row
  int* sSlot = reinterpret_cast<int*>(sOff + chunk);        // (chunk) slot of each entry
  unsigned char* sKV = reinterpret_cast<unsigned char*>(sSlot + chunk);  // per warp: stages x STAGE bytes
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int kvh = blockIdx.x, split = blockIdx.y, row = blockIdx.z, splits = gridDim.y;
  const int G = nHeads / nKv;
  const int end = listLen - n + row + 1;
  const int ks = split * chunk, ke = min(end, ks + chunk), nk = max(0, ke - ks);
  const int* list = lists + (perHead ? (size_t)kvh * listLen : 0);

  // the queries (and the inverse frequencies): asynchronous, in flight with the lookups below (rows >= G
  // zero-filled from a valid address)
  for (int c = tid; c < 16 * CPR; c += LD_WARPS * 32) {
    const int r = c / CPR, col = (c % CPR) * 8;
    const bool ok = r < G;
    cp_async16(sQ + r * LD + col, ok ? Q + ((size_t)row * nHeads + kvh * G + r) * D + col : Q, ok ? 16 : 0);
  }
  if (COMPACT && tid < HALF) ld_cp_async4(sInv + tid, invFreq + tid);  // HALF <= 64 < the block's 128 threads
  cp_async_commit();

  const int nT = (nk + LD_TK - 1) / LD_TK;  // split tile t holds split entries [t * TK, t * TK + TK)
  const int myTiles = warp < nT ? (nT - warp + LD_WARPS - 1) / LD_WARPS : 0;  // the warp's tiles: warp + j * 4
  // entry e of the warp's own numbering (its j-th tile, row e % TK) is split entry warpEntry(e)
  auto warpEntry = [&](int e) { return (warp + (e / LD_TK) * LD_WARPS) * LD_TK + e % LD_TK; };
  // the buffered tiles: every lane's list loads first, then the dependent page-table loads
  {
    constexpr int PER = (LD_MAX_STAGES * LD_TK + 31) / 32;
    int slot[PER], at[PER];
#pragma unroll
    for (int u = 0; u < PER; u++) {
      const int e = lane + u * 32;
      at[u] = e < stages * LD_TK ? warpEntry(e) : nk;
      slot[u] = at[u] < nk ? list[ks + at[u]] : 0;
    }
#pragma unroll
    for (int u = 0; u < PER; u++)
      if (at[u] < nk) {
        sOff[at[u]] = kv_offset(pageTable, slot[u], kvh, nKv, pageSize, D);
        sSlot[at[u]] = slot[u];
      }
  }
  __syncwarp();

  unsigned char* mine = sKV + (size_t)warp * stages * STAGE;
  auto load = [&](int stage, int t) {  // split tile t into the warp's buffer stage (past the split: zeros)
    bf16* dk = reinterpret_cast<bf16*>(mine + stage * STAGE);
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
  for (int st = 0; st < stages; st++) {
    if (st < myTiles) load(st, warp + st * LD_WARPS);
    cp_async_commit();
  }
  asm volatile("" ::: "memory");  // keep the lookups below (and their waits) after the copies above
  // the rest of the warp's tiles (long lists only), looked up while the first ones are in flight
  for (int e = stages * LD_TK + lane; e < myTiles * LD_TK; e += 32) {
    const int i = warpEntry(e);
    if (i < nk) {
      const int slot = list[ks + i];
      sOff[i] = kv_offset(pageTable, slot, kvh, nKv, pageSize, D);
      sSlot[i] = slot;
    }
  }
  __syncwarp();
  ld_wait_pending(stages);  // this thread's query pieces (the group before the stages')
  __syncthreads();          // everyone's
  unsigned qf[D / 16][4];
  tile_q_frags<D, LD>(qf, sQ, lane);

  float o[D / 8][4], mRow[2], lRow[2];
  tile_init<D>(o, mRow, lRow);
  const float sl2 = scale * LOG2E;
  const int qd = lane & 3;

  // Compact keys, RoPE at list position ks + t * TK + r of the rotate-half pairs (j, j + HALF), on the B
  // fragments: register m of an ldmatrix_x4 holds key row (lane >> 2) + 8 (m >> 1), dims kk * 16 + 8 (m & 1) +
  // 2 qd (+1), and the same register of k-step kk + HALF / 16 holds the partner dims. Rows past the split are
  // zeros (and masked): their angles need no clamp.
  constexpr int KH = HALF / 16;                   // k-steps of the first half of the dims
  constexpr int PRE = LD_PRE < KH ? LD_PRE : KH;  // of them computed before the wait
  constexpr int REGS = LD_TK / 16 * 4;            // B fragment registers of one k-step (np, m)
  auto ropeCs = [&](int t, int kk, int np, int m, float2& c, float2& sn) {
    const float pos = (float)(ks + t * LD_TK + np * 16 + (lane >> 2) + (m >> 1) * 8);  // key row's list position
    const float2 f = *reinterpret_cast<const float2*>(sInv + kk * 16 + (m & 1) * 8 + qd * 2);  // its dims' invFreq
    ld_rope_cs(pos, f.x, &c.x, &sn.x);
    ld_rope_cs(pos, f.y, &c.y, &sn.y);
  };

  for (int it = 0; it < myTiles; it++) {
    const int t = warp + it * LD_WARPS, buf = it % stages;
    // compact: the first PRE k-steps' cos/sin while the tile may still fly (MUFU work off the critical path)
    float2 preC[PRE][REGS], preS[PRE][REGS];
    if (COMPACT) {
#pragma unroll
      for (int kk = 0; kk < PRE; kk++)
#pragma unroll
        for (int r = 0; r < REGS; r++) {
          ropeCs(t, kk, r / 4, r % 4, preC[kk][r], preS[kk][r]);
          // pinned before the wait: the compiler would sink this work below it (fewer live registers)
          asm volatile("" : "+f"(preC[kk][r].x), "+f"(preC[kk][r].y), "+f"(preS[kk][r].x), "+f"(preS[kk][r].y));
        }
    }
    ld_wait_pending(stages - 1);  // tile t's group (stages - 1 later ones may still fly)
    __syncwarp();
    const bf16* k = reinterpret_cast<const bf16*>(mine + buf * STAGE);
    const bf16* v = k + TILE;

    float s[LD_TK / 8][4];
    if (COMPACT) {
#pragma unroll
      for (int j = 0; j < LD_TK / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[j][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < KH; kk++) {
#pragma unroll
        for (int np = 0; np < LD_TK / 16; np++) {
          unsigned a[4], b[4];
          const bf16* kp = k + (np * 16 + (lane & 7) + (lane >> 4) * 8) * LD + kk * 16 + ((lane >> 3) & 1) * 8;
          ldmatrix_x4(a[0], a[1], a[2], a[3], kp);
          ldmatrix_x4(b[0], b[1], b[2], b[3], kp + HALF);
#pragma unroll
          for (int m = 0; m < 4; m++) {
            float2 c, sn;
            if (kk < PRE) {
              c = preC[kk][np * 4 + m];
              sn = preS[kk][np * 4 + m];
            } else {
              ropeCs(t, kk, np, m, c, sn);
            }
            // rotated, then rounded to bf16 as the keys were
            const float2 x1 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&a[m]));
            const float2 x2 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&b[m]));
            a[m] = pack_bf16(x1.x * c.x - x2.x * sn.x, x1.y * c.y - x2.y * sn.y);
            b[m] = pack_bf16(x2.x * c.x + x1.x * sn.x, x2.y * c.y + x1.y * sn.y);
          }
          mma_bf16(s[2 * np], qf[kk], a[0], a[1]);
          mma_bf16(s[2 * np + 1], qf[kk], a[2], a[3]);
          mma_bf16(s[2 * np], qf[kk + KH], b[0], b[1]);
          mma_bf16(s[2 * np + 1], qf[kk + KH], b[2], b[3]);
        }
      }
    } else {
      tile_qk<LD_TK, D, LD>(s, qf, k, lane);
    }
    tile_softmax<LD_TK, D>(s, o, mRow, lRow, [&](int j, int e, float sv) {
      int i = t * LD_TK + j * 8 + qd * 2 + (e & 1);
      if (i >= nk) return -INFINITY;
      float x = sv * sl2;
      // SelKV's bias of (slot, query head) in log2 units; tile row r = (lane >> 2) + 8 (e >> 1) is head kvh * G + r
      const int r = (lane >> 2) + ((e >> 1) << 3);
      if (bias != nullptr && r < G) x += __ldg(bias + (size_t)sSlot[i] * nHeads + kvh * G + r) * LOG2E;
      return x;
    });
    tile_pv<LD_TK, D, LD>(o, s, v, lane);
    __syncwarp();  // every lane is done with this buffer: refill it `stages` tiles on
    if (it + stages < myTiles) load(buf, t + stages * LD_WARPS);
    cp_async_commit();
  }
  cp_async_wait<0>();
  tile_row_sums(lRow);

  // merge the warps' online softmaxes of the same rows (only the G real ones): the K/V buffers take the
  // (WARPS, 16, SO) f32 rows, the offsets' space the per-warp max and sum (chunk >= 64 entries: 512 bytes >=
  // (2, WARPS, 16) f32)
  tile_merge_warps_at<D, LD_WARPS, SO>(reinterpret_cast<float*>(sKV), reinterpret_cast<float*>(sOff), o, mRow, lRow,
                                       partO, partML, ((size_t)row * nHeads + kvh * G) * splits + split, G, splits);

  if (counters == nullptr) return;
  // last block of this (row, KV head) merges every split's partials (threadFenceReduction pattern)
  __shared__ int isLast;
  __threadfence();  // this block's partials are visible device-wide before it is counted
  __syncthreads();
  if (tid == 0) isLast = atomicAdd(counters + (size_t)row * nKv + kvh, 1) == splits - 1;
  __syncthreads();
  if (!isLast) return;
  __threadfence();
  // (head r, split sp) of this KV head's partials sits at first + r * splits + sp; a thread per (head, four dims)
  const size_t first = ((size_t)row * nHeads + kvh * G) * splits;
  for (int idx = tid; idx < G * D / 4; idx += LD_WARPS * 32) {
    const int r = idx / (D / 4), d = (idx % (D / 4)) * 4;
    merge_splits4<LD_MERGE>(out + ((size_t)row * nHeads + kvh * G + r) * D, partO, partML, first + (size_t)r * splits,
                            splits, D, d);
  }
  if (tid == 0) counters[(size_t)row * nKv + kvh] = 0;  // ready for the next launch
}

// One kernel per head size and key kind (compact: the rotation on the fragments).
// At least 3 blocks per multiprocessor: what the plan's shared memory allows, so registers must too
// (ptxas -v, d128 compact / d128 / d64 (both): sm_90 168 / 163 / 161, sm_80 166 / 139 / 132, sm_86 and sm_89
// 168 / 139 / 132 registers, no spills; at d128 compact the cos/sin computed before the wait (LD_PRE) take
// what the tile loop leaves, elsewhere most of it is the fused merge's batch of loads).
#define LIST_DECODE_KERNEL(NAME, D, COMPACT)                                                                     \
  extern "C" __global__ void __launch_bounds__(LD_WARPS * 32, 3)                                                 \
      NAME(bf16* out, int* counters, float* partO, float* partML, const bf16* Q, const bf16* K, const bf16* V,     \
           const int* pageTable, const int* lists, const float* bias, const float* invFreq, int nHeads, int nKv,   \
           int pageSize, int listLen, int n, int perHead, int chunk, int stages, float scale) {                   \
    list_decode<D, COMPACT>(out, counters, partO, partML, Q, K, V, pageTable, lists, bias, invFreq, nHeads, nKv,    \
                            pageSize, listLen, n, perHead, chunk, stages, scale);                                \
  }
LIST_DECODE_KERNEL(list_decode_d64, 64, false)
LIST_DECODE_KERNEL(list_decode_d128, 128, false)
LIST_DECODE_KERNEL(list_decode_d64_compact, 64, true)
LIST_DECODE_KERNEL(list_decode_d128_compact, 128, true)
