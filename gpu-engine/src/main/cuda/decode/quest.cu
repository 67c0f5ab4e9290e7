// The decode baselines' own kernels (CPU twins: cpu/policy/Quest.java and StreamingLlm.Window).
//   quest_bounds:  element-wise min/max of the rotated keys of Quest pages [p0, p1) (pages of qpage slots).
//   quest_scores:  per query head and full page, sum_i max(q_i * min_i, q_i * max_i) with the query rotated
//                  in f32 from the pre-RoPE row (as the CPU rotates its f32 query).
//   quest_topk:    per head the pick highest page scores, ties to the lower page, ascending (cpu/policy/TopK).
//   quest_attend:  per query head, attention over its chosen pages plus the newest (partial) page, split over
//                  blocks; attn_combine (split_attention.cu) merges the splits.
//   window_list:   StreamingLLM's list, sinks ++ the last `recent` slots.
#include "../common/common.cuh"
#include "../common/step_sizes.cuh"

#define QB_THREADS 256
#define QS_WARPS 8
#define QS_PAGES 64      // pages scored per block of quest_scores
#define QS_MAXG 16       // query heads per KV head quest_scores takes
#define QT_THREADS 256
#define QA_THREADS 128
#define QA_KEYS 8        // keys a warp of quest_attend scores together (their loads in flight at once)
#define QA_UNROLL 16     // entries whose value loads a thread of quest_attend issues together

// Grid (p1 - p0), block QB_THREADS. mn, mx (pages, nKv * d) bf16: min/max over the page's slots of kRope
// (keys rotated at their positions; min/max of bf16 values is exact, so bf16 storage loses nothing).
extern "C" __global__ void __launch_bounds__(QB_THREADS)
    quest_bounds(bf16* __restrict__ mn, bf16* __restrict__ mx, const bf16* __restrict__ kRope,
                 const int* __restrict__ pageTable, int nKv, int d, int cachePage, int qpage, int p0) {
  const int p = p0 + blockIdx.x, kvDim = nKv * d;
  for (int e = threadIdx.x; e < kvDim; e += QB_THREADS) {
    const int g = e / d, i = e - g * d;
    float lo = INFINITY, hi = -INFINITY;
    for (int s = p * qpage; s < (p + 1) * qpage; s++) {
      float v = bf2f(kRope[kv_offset(pageTable, s, g, nKv, cachePage, d) + i]);
      lo = fminf(lo, v);
      hi = fmaxf(hi, v);
    }
    mn[(size_t)p * kvDim + e] = f2bf(lo);
    mx[(size_t)p * kvDim + e] = f2bf(hi);
  }
}

// Rotates head h of the pre-RoPE f32 query row at pos into qr (d floats of shared memory), with the
// CPU's rounding: f32 angle, cos/sin via double, separate f32 multiply and add (no FMA contraction).
__device__ __forceinline__ void rotate_query(float* qr, const float* __restrict__ qPre, const float* __restrict__ invFreq,
                                             int h, int d, int pos) {
  const int half = d / 2;
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float c, s;
    rope_cs(pos, invFreq[i], &c, &s);
    float x1 = qPre[h * d + i], x2 = qPre[h * d + half + i];
    qr[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    qr[i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
  }
}

// Grid (nKv, ceil(full / QS_PAGES)), block QS_WARPS * 32; G = nHeads / nKv <= QS_MAXG. score (nHeads, full) f32.
// One block serves the group's query heads, so each page's bounds are read once per KV head.
extern "C" __global__ void __launch_bounds__(QS_WARPS * 32)
    quest_scores(float* __restrict__ score, const float* __restrict__ qPre, const float* __restrict__ invFreq, int pos,
                 const bf16* __restrict__ mn, const bf16* __restrict__ mx, int nHeads, int nKv, int d, int full,
                 const int* __restrict__ step) {
  pos = step_size(step, STEP_POS, pos);  // a captured step: this step's position
  __shared__ float qr[QS_MAXG * 256];  // (G, d) rotated queries of the group
  const int g = blockIdx.x, G = nHeads / nKv, kvDim = nKv * d, half = d / 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int t = threadIdx.x; t < G * half; t += blockDim.x) {
    const int j = t / half, i = t - j * half, h = g * G + j;
    float c, s;
    rope_cs(pos, invFreq[i], &c, &s);
    float x1 = qPre[h * d + i], x2 = qPre[h * d + half + i];
    qr[j * d + i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    qr[j * d + half + i] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
  }
  __syncthreads();
  const int pEnd = min(full, (blockIdx.y + 1) * QS_PAGES);
  for (int p = blockIdx.y * QS_PAGES + warp; p < pEnd; p += QS_WARPS) {
    const size_t o = (size_t)p * kvDim + (size_t)g * d;
    float acc[QS_MAXG];
#pragma unroll
    for (int j = 0; j < QS_MAXG; j++) acc[j] = 0.f;
    for (int i = lane; i < d; i += 32) {
      const float lo = bf2f(mn[o + i]), hi = bf2f(mx[o + i]);
#pragma unroll
      for (int j = 0; j < QS_MAXG; j++) {
        if (j < G) {
          const float q = qr[j * d + i];
          acc[j] += fmaxf(q * lo, q * hi);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < QS_MAXG; j++) {
      if (j < G) {  // G and the page loop bound are warp-uniform: every lane takes part in the shuffle
        float t = warp_sum(acc[j]);
        if (lane == 0) score[(size_t)(g * G + j) * full + p] = t;
      }
    }
  }
}

// The float's total order as an unsigned key (cpu/policy/TopK.sortable with the sign bit flipped).
__device__ __forceinline__ unsigned quest_key(float f) {
  int b = __float_as_int(f);
  int s = b ^ ((b >> 31) & 0x7FFFFFFF);
  return (unsigned)s ^ 0x80000000u;
}

// Exclusive prefix sum over the block (blockDim.x a multiple of 32); sh: 32 ints of shared memory.
__device__ __forceinline__ int block_exclusive_scan(int v, int* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    int t = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += t;
  }
  __syncthreads();
  if (lane == 31) sh[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int t = lane < nw ? sh[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      int u = __shfl_up_sync(0xffffffffu, t, o);
      if (lane >= o) t += u;
    }
    if (lane < nw) sh[lane] = t;  // inclusive totals of warps 0..lane
  }
  __syncthreads();
  int base = warp > 0 ? sh[warp - 1] : 0;
  __syncthreads();
  return base + incl - v;
}

// Grid (nHeads), block QT_THREADS. chosen (nHeads, pick) int = the pick best of score (nHeads, full), ascending;
// 0 < pick < full. Radix select of the pick-th largest key (4 passes of 8 bits), then an ordered compaction that
// takes every key above it and the lowest-index ties.
extern "C" __global__ void __launch_bounds__(QT_THREADS)
    quest_topk(int* __restrict__ chosen, const float* __restrict__ score, int full, int pick) {
  __shared__ unsigned hist[256];
  __shared__ unsigned sPrefix;
  __shared__ int sRemain;
  __shared__ int scan[32];
  const float* sc = score + (size_t)blockIdx.x * full;
  const int tid = threadIdx.x;
  unsigned prefix = 0u, mask = 0u;
  int remain = pick;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += QT_THREADS) hist[b] = 0u;
    __syncthreads();
    for (int i = tid; i < full; i += QT_THREADS) {
      unsigned k = quest_key(sc[i]);
      if ((k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid == 0) {
      int cum = 0;
      for (int b = 255; b >= 0; b--) {
        if (cum + (int)hist[b] >= remain) {
          sPrefix = prefix | ((unsigned)b << shift);
          sRemain = remain - cum;
          break;
        }
        cum += (int)hist[b];
      }
    }
    __syncthreads();
    prefix = sPrefix;
    remain = sRemain;
    mask |= 255u << shift;
    __syncthreads();
  }
  // prefix is the pick-th largest key; take all above it and the first `remain` equal to it (lowest pages)
  const int per = (full + QT_THREADS - 1) / QT_THREADS, lo = min(full, tid * per), hi = min(full, lo + per);
  int eq = 0;
  for (int i = lo; i < hi; i++) eq += quest_key(sc[i]) == prefix;
  int eqSeen = block_exclusive_scan(eq, scan);
  int sel = 0;
  for (int i = lo, e = eqSeen; i < hi; i++) {
    unsigned k = quest_key(sc[i]);
    if (k > prefix) sel++;
    else if (k == prefix && e++ < remain) sel++;
  }
  int out = block_exclusive_scan(sel, scan);
  int* dst = chosen + (size_t)blockIdx.x * pick;
  for (int i = lo, e = eqSeen; i < hi; i++) {
    unsigned k = quest_key(sc[i]);
    bool take = k > prefix || (k == prefix && e++ < remain);
    if (take && out < pick) dst[out++] = i;
  }
}

// Grid (nHeads, splits), block QA_THREADS; dynamic shared memory (d + chunk + 32) floats + chunk size_t.
// Head h attends to list entries e in [0, pick * qpage + tail): entry e < pick * qpage is slot
// chosen[h][e / qpage] * qpage + e % qpage, the rest are the slots full * qpage .. of the newest page.
// partO (nHeads, splits, d) f32 unnormalised, partML (nHeads, splits, 2) (max, sum): attn_combine's layout, one row.
// Latency: a warp scores QA_KEYS keys at a time (lanes look their slots up in parallel, then every key's
// loads go out before any sum), and the entries' cache offsets are kept in shared memory so the value
// pass has no lookups and keeps QA_UNROLL loads in flight per thread. Each score and output is summed in the
// same order as one key / one entry at a time.
extern "C" __global__ void __launch_bounds__(QA_THREADS)
    quest_attend(float* __restrict__ partO, float* __restrict__ partML, const float* __restrict__ qPre,
                 const float* __restrict__ invFreq, int pos, const bf16* __restrict__ kRope, const bf16* __restrict__ V,
                 const int* __restrict__ pageTable, const float* __restrict__ bias, const int* __restrict__ chosen,
                 int nHeads, int nKv, int d, int cachePage, int qpage, int pick, int full, int tail, int chunk,
                 float scale, const int* __restrict__ step) {
  if (step != nullptr) {  // a captured step: its position, and the slots of the newest page (full is baked in)
    pos = step[STEP_POS];
    tail = step[STEP_END] - full * qpage;
  }
  extern __shared__ float quest_smem[];
  float* qr = quest_smem;              // (d) rotated query
  float* sc = quest_smem + d;          // (chunk) scores, then probabilities
  float* red = quest_smem + d + chunk; // (32) reductions
  size_t* sOff = reinterpret_cast<size_t*>(red + 32);  // (chunk) cache offset of each entry's row (d + chunk even)
  const int h = blockIdx.x, split = blockIdx.y, splits = gridDim.y, g = h / (nHeads / nKv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = QA_THREADS / 32;
  const int len = pick * qpage + tail, e0 = split * chunk, cnt = max(0, min(len, e0 + chunk) - e0);
  const int* pages = chosen + (size_t)h * pick;
  rotate_query(qr, qPre, invFreq, h, d, pos);
  __syncthreads();
  for (int j0 = warp * QA_KEYS; j0 < cnt; j0 += nw * QA_KEYS) {
    // lane u < QA_KEYS looks up entry j0 + u (slot, offset, bias), all in parallel
    size_t myOff = 0;
    float myBias = 0.f;
    if (lane < QA_KEYS && j0 + lane < cnt) {
      const int e = e0 + j0 + lane;
      const int slot = e < pick * qpage ? pages[e / qpage] * qpage + e % qpage : full * qpage + (e - pick * qpage);
      myOff = kv_offset(pageTable, slot, g, nKv, cachePage, d);
      myBias = bias ? bias[(size_t)slot * nHeads + h] : 0.f;  // (slot, query head)
      sOff[j0 + lane] = myOff;
    }
    size_t o[QA_KEYS];
#pragma unroll
    for (int u = 0; u < QA_KEYS; u++) o[u] = __shfl_sync(0xffffffffu, (unsigned long long)myOff, u);
    float s[QA_KEYS];
#pragma unroll
    for (int u = 0; u < QA_KEYS; u++) s[u] = 0.f;
    for (int i = lane; i < d; i += 32) {
      const float q = qr[i];
#pragma unroll
      for (int u = 0; u < QA_KEYS; u++)
        if (j0 + u < cnt) s[u] += q * bf2f(kRope[o[u] + i]);
    }
    float mine = 0.f;
#pragma unroll
    for (int u = 0; u < QA_KEYS; u++) {
      const float t = warp_sum(s[u]);  // every lane takes part (the bound is warp-uniform)
      if (lane == u) mine = t;
    }
    if (lane < QA_KEYS && j0 + lane < cnt) sc[j0 + lane] = mine * scale + myBias;
  }
  __syncthreads();
  float m = -INFINITY;
  for (int j = threadIdx.x; j < cnt; j += QA_THREADS) m = fmaxf(m, sc[j]);
  m = block_max(m, red);
  float l = 0.f;
  __syncthreads();  // every thread has read red before the sum reuses it
  for (int j = threadIdx.x; j < cnt; j += QA_THREADS) {
    float p = m == -INFINITY ? 0.f : expf(sc[j] - m);
    sc[j] = p;
    l += p;
  }
  l = block_sum(l, red);  // its leading __syncthreads also publishes the probabilities
  const size_t base = (size_t)h * splits + split;
  for (int i = threadIdx.x; i < d; i += QA_THREADS) {
    float acc = 0.f;
    int j = 0;
    for (; j + QA_UNROLL <= cnt; j += QA_UNROLL) {
      float v[QA_UNROLL];
#pragma unroll
      for (int u = 0; u < QA_UNROLL; u++) v[u] = bf2f(V[sOff[j + u] + i]);
#pragma unroll
      for (int u = 0; u < QA_UNROLL; u++) acc += sc[j + u] * v[u];
    }
    for (; j < cnt; j++) acc += sc[j] * bf2f(V[sOff[j] + i]);
    partO[base * d + i] = acc;
  }
  if (threadIdx.x == 0) {
    partML[base * 2] = m;
    partML[base * 2 + 1] = l;
  }
}

// Grid 1, block 256. list (sinks + recent) int = 0 .. sinks-1, then n - recent .. n-1.
extern "C" __global__ void window_list(int* __restrict__ list, int sinks, int recent, int n,
                                       const int* __restrict__ step) {
  n = step_size(step, STEP_END, n);  // a captured step: the slots this step sees
  for (int i = threadIdx.x; i < sinks + recent; i += blockDim.x) list[i] = i < sinks ? i : n - recent + (i - sinks);
}
