// Attention of query rows over LISTS of cache slots, the kernel every selection policy ends in. CPU
// twin: cpu/policy/ListAttention; Java wrapper: io.longsieve.cuda.kernels.ListKernels (it chooses the path).
// Row i of n sees list entries [0, listLen - n + i + 1). Lists (nLists, listLen) int slots; perHead:
// KV head g reads list g, else list 0. Keys: original positions read krope at the slot; compact
// positions read kpre at the slot and rotate entry e at position e with the (positions, D/2) f32
// cos/sin tables (rope_table; list_decode computes its rows from the inverse frequencies instead).
// bias (slots, nHeads) f32 or null (per query head) is added to the scaled logit.
//   list_split_core:        CUDA cores, any power-of-two D in [8, 256], up to 8 heads per block.
//   list_decode_d64 / d128: tensor cores, flash decoding over gathered rows (decode_attention.cu's
//                           scheme with a per-row slot address), up to 16 heads per KV head.
//   list_gather:            copies a list's keys (rotated) and values into a dense identity-paged
//                           cache, for the dense flash prefill of many rows.
// Both split kernels write attn_split's partial format; attn_combine (split_attention.cu) merges.
#include "../common/attn_tile.cuh"

// cos, sin (positions, half) f32: the RoPE angles of positions 0.., exactly as model/Rope.angles.
extern "C" __global__ void rope_table(float* __restrict__ cosT, float* __restrict__ sinT,
                                      const float* __restrict__ invFreq, int positions, int half) {
  const size_t total = (size_t)positions * half;
  for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (size_t)gridDim.x * blockDim.x) {
    int p = (int)(t / half), i = (int)(t % half);
    float c, s;
    rope_cs(p, invFreq[i], &c, &s);
    cosT[t] = c;
    sinT[t] = s;
  }
}

// Eight consecutive elements [d0, d0 + 8) of a head vector as floats.
__device__ __forceinline__ void load8(const bf16* p, float* f) {
  unpack8(__ldg(reinterpret_cast<const uint4*>(p)), *reinterpret_cast<float(*)[8]>(f));
}

// Rotates elements [d0, d0 + 8) of the key row at `row` (element offset) at position pos, rotate-half
// as model/Rope.apply: element x pairs with x ^ half (half = D / 2 is a power of two >= 4).
__device__ __forceinline__ void rotate8(const bf16* K, size_t row, int d0, int D, int pos, const float* cosT,
                                        const float* sinT, float* f) {
  const int half = D >> 1;
  float p[8];
  if (D >= 16) {
    load8(K + row + (d0 ^ half), p);  // partner chunk in the other half
  } else {
#pragma unroll
    for (int t = 0; t < 8; t++) p[t] = f[t ^ 4];  // D == 8: both halves in this chunk
  }
  const float* c = cosT + (size_t)pos * half;
  const float* s = sinT + (size_t)pos * half;
#pragma unroll
  for (int t = 0; t < 8; t++) {
    int x = d0 + t, j = x & (half - 1);
    float own = f[t], other = p[t];
    f[t] = x < half ? own * c[j] - other * s[j] : own * c[j] + other * s[j];
  }
}

#define LC_THREADS 256
#define LC_HEADS 8

// Grid (nKv * headBlocks, splits, n), block LC_THREADS. Dynamic shared memory: (heads, chunk) f32
// scores, LC_THREADS * 8 f32 reduction scratch, (chunk) size_t row offsets, (chunk) int slots (for the bias).
// partO (n, nHeads, splits, D) f32 unnormalised; partML (n, nHeads, splits, 2) f32 (max, sum).
extern "C" __global__ void __launch_bounds__(LC_THREADS)
    list_split_core(float* __restrict__ partO, float* __restrict__ partML, const bf16* __restrict__ Q,
                    const bf16* __restrict__ K, const bf16* __restrict__ V, const int* __restrict__ pageTable,
                    const int* __restrict__ lists, const float* __restrict__ bias, const float* __restrict__ cosT,
                    const float* __restrict__ sinT, int nHeads, int nKv, int D, int pageSize, int listLen, int n,
                    int perHead, int compact, int headBlocks, int chunk, float scale) {
  extern __shared__ __align__(16) unsigned char lc_smem[];
  __shared__ float stat[LC_HEADS][2];
  const int kvh = blockIdx.x / headBlocks, hb = blockIdx.x % headBlocks;
  const int split = blockIdx.y, row = blockIdx.z, splits = gridDim.y, tid = threadIdx.x;
  const int G = nHeads / nKv;
  const int h0 = kvh * G + hb * LC_HEADS;            // first query head of this block
  const int H = min(LC_HEADS, G - hb * LC_HEADS);    // heads of this block
  const int TPK = D / 8, KPP = LC_THREADS / TPK;      // threads per key, keys per pass
  const int end = listLen - n + row + 1;
  const int ks = split * chunk, ke = min(end, ks + chunk), nk = max(0, ke - ks);
  float* sc = reinterpret_cast<float*>(lc_smem);                  // (H, chunk)
  float* red = sc + H * chunk;                                     // (LC_THREADS * 8)
  size_t* sOff = reinterpret_cast<size_t*>(red + LC_THREADS * 8);  // (chunk)
  int* sSlot = reinterpret_cast<int*>(sOff + chunk);               // (chunk) the entries' slots
  const int* list = lists + (perHead ? (size_t)kvh * listLen : 0);

  for (int i = tid; i < nk; i += LC_THREADS) {
    int slot = list[ks + i];
    sOff[i] = kv_offset(pageTable, slot, kvh, nKv, pageSize, D);
    sSlot[i] = slot;
  }
  __syncthreads();

  const int sub = tid % TPK, kslot = tid / TPK, d0 = sub * 8;
  float qv[LC_HEADS][8];
#pragma unroll
  for (int g = 0; g < LC_HEADS; g++) {
    if (g < H) {
      load8(Q + ((size_t)row * nHeads + h0 + g) * D + d0, qv[g]);
#pragma unroll
      for (int j = 0; j < 8; j++) qv[g][j] *= scale;
    }
  }

  // phase 1: scores. Loop bounds are block-uniform: the shuffles need whole warps.
  for (int base = 0; base < nk; base += KPP) {
    const int i = base + kslot;
    float kf[8];
    if (i < nk) {
      load8(K + sOff[i] + d0, kf);
      if (compact) rotate8(K, sOff[i], d0, D, ks + i, cosT, sinT, kf);
    } else {
#pragma unroll
      for (int j = 0; j < 8; j++) kf[j] = 0.f;
    }
#pragma unroll
    for (int g = 0; g < LC_HEADS; g++) {
      if (g < H) {
        float s = split_dot(qv[g], kf, TPK);
        if (sub == 0 && i < nk) sc[g * chunk + i] = s + (bias ? bias[(size_t)sSlot[i] * nHeads + h0 + g] : 0.f);
      }
    }
  }
  __syncthreads();

  // phase 2: per-head max and sum; scores become exp(s - max); all -inf (masked by bias): probabilities 0, not NaN
  split_softmax<LC_THREADS, true>(sc, chunk, nk, H, red, stat);

  // phase 3: P V
  float acc[LC_HEADS][8];
  split_zero(acc);
  for (int i = kslot; i < nk; i += KPP) {
    float vf[8];
    load8(V + sOff[i] + d0, vf);
    split_pv(acc, sc + i, chunk, H, vf);
  }
  // reduce the KPP key slots of each head through shared memory
  split_store<LC_THREADS>(acc, red, stat, partO, partML, ((size_t)row * nHeads + h0) * splits + split, H, splits, D,
                          KPP, kslot, d0);
}

// Grid (pages * 64 / LG_ROWS, nKv), block LG_ROWS * D / 8: copies list entries into gk, gv (pages, nKv,
// 64, D) bf16 at entry e = page e / 64, row e % 64 (keys rotated at e when compact), writes the
// identity page table gpt (pages) int; entries past listLen become zeros.
#define LG_ROWS 8
extern "C" __global__ void list_gather(bf16* __restrict__ gk, bf16* __restrict__ gv, int* __restrict__ gpt,
                                       const bf16* __restrict__ K, const bf16* __restrict__ V,
                                       const int* __restrict__ pageTable, const int* __restrict__ lists,
                                       const float* __restrict__ cosT, const float* __restrict__ sinT, int listLen,
                                       int perHead, int compact, int nKv, int D, int pageSize) {
  const int kvh = blockIdx.y, tpr = D / 8;
  const int e = blockIdx.x * LG_ROWS + threadIdx.x / tpr, d0 = (threadIdx.x % tpr) * 8;
  const int page = e / 64;
  if (kvh == 0 && threadIdx.x == 0 && blockIdx.x % (64 / LG_ROWS) == 0) gpt[page] = page;
  const size_t dst = (((size_t)page * nKv + kvh) * 64 + e % 64) * D + d0;
  uint4 kOut = make_uint4(0, 0, 0, 0), vOut = make_uint4(0, 0, 0, 0);
  if (e < listLen) {
    const int slot = lists[(perHead ? (size_t)kvh * listLen : 0) + e];
    const size_t src = kv_offset(pageTable, slot, kvh, nKv, pageSize, D);
    vOut = __ldg(reinterpret_cast<const uint4*>(V + src + d0));
    if (compact) {
      float f[8];
      load8(K + src + d0, f);
      rotate8(K, src, d0, D, e, cosT, sinT, f);
      kOut = make_uint4(pack_bf16(f[0], f[1]), pack_bf16(f[2], f[3]), pack_bf16(f[4], f[5]), pack_bf16(f[6], f[7]));
    } else {
      kOut = __ldg(reinterpret_cast<const uint4*>(K + src + d0));
    }
  }
  *reinterpret_cast<uint4*>(gk + dst) = kOut;
  *reinterpret_cast<uint4*>(gv + dst) = vOut;
}

