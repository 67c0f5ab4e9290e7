// KV compression, stage 3 (see kv_compress.cu): SelKV's routing, gated merge and logit bias (the compaction
// that follows: kv_compact.cu). CPU twin: cpu/policy/SelKvMerge (stages 3-5 of the seed's six).
// Per KV head g the keep list keep[g, 0 .. keepLd) ascends: sinks, then the selected tokens
// keep[g, from .. to), then the window; only the selected tokens are merge targets. A slot's position is
// slot + posOffset (the prompt is contiguous in the cache), its bucket floor(position / bucket).
#include "kv_tile.cuh"

// The first j in [from, to) with list[j] >= slot (to when none): the list ascends.
__device__ __forceinline__ int kvc_lower_bound(const int* list, int from, int to, long long slot) {
  int lo = from, hi = to;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if ((long long)list[mid] >= slot) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

__device__ __forceinline__ long long kvc_bucket(int slot, int posOffset, int bucket) {
  const long long p = (long long)slot + posOffset;
  return p >= 0 ? p / bucket : -((-p + bucket - 1) / bucket);  // floor
}

// runBest (nKv, keepLd) int: for each selected token j in [from, to) of KV head g = blockIdx.y, the index
// of the most attended selected token of its bucket (mass (nKv, n), the group's observation attention; the
// first maximum, i.e. the lower slot on ties). A thread per selected token; the first of each bucket's run
// scans the run (at most `bucket` tokens) and writes it for all of them.
extern "C" __global__ void kvc_bucket_best(int* __restrict__ runBest, const int* __restrict__ keep, int keepLd,
                                           int from, int to, const float* __restrict__ mass, int n, int posOffset,
                                           int bucket) {
  const int g = blockIdx.y, j = from + blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= to) return;
  const int* kg = keep + (size_t)g * keepLd;
  const float* mg = mass + (size_t)g * n;
  const long long b = kvc_bucket(kg[j], posOffset, bucket);
  if (j > from && kvc_bucket(kg[j - 1], posOffset, bucket) == b) return;  // not the run's first
  int end = j, best = j;
  while (end < to && kvc_bucket(kg[end], posOffset, bucket) == b) {
    if (mg[kg[end]] > mg[kg[best]]) best = end;
    end++;
  }
  for (int x = j; x < end; x++) runBest[(size_t)g * keepLd + x] = best;
}

// target (nKv, nDrop) int: for dropped slot drop[g, i] of KV head g = blockIdx.y, the index into keep of
// its target: runBest of the first selected token of its bucket, else the nearest selected token by
// position (the earlier on a tie); -1 when nothing is selected. A thread per dropped slot.
extern "C" __global__ void kvc_route(int* __restrict__ target, const int* __restrict__ drop, int nDrop,
                                     const int* __restrict__ keep, int keepLd, int from, int to,
                                     const int* __restrict__ runBest, int posOffset, int bucket) {
  const int g = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nDrop) return;
  int* out = target + (size_t)g * nDrop + i;
  if (from >= to) {
    *out = -1;
    return;
  }
  const int* kg = keep + (size_t)g * keepLd;
  const int slot = drop[(size_t)g * nDrop + i];
  const long long b = kvc_bucket(slot, posOffset, bucket);
  const long long bucketStart = b * bucket - posOffset;  // first slot of the bucket
  const int first = kvc_lower_bound(kg, from, to, bucketStart);
  if (first < to && kvc_bucket(kg[first], posOffset, bucket) == b) {
    *out = runBest[(size_t)g * keepLd + first];
    return;
  }
  const int after = kvc_lower_bound(kg, from, to, (long long)slot + 1), before = after - 1;
  if (after >= to) *out = before;
  else if (before < from) *out = after;
  else *out = slot - kg[before] <= kg[after] - slot ? before : after;
}

// Accumulates every routed dropped slot into its target t (a warp per (g, dropped)): the gate
// gi = max(cos(v_i, v_t), 0) on the values (0 for a zero vector; gi = 0 adds nothing), w = gi * mass[g, i];
// weight (nKv, keepLd) += w; vAcc (nKv, keepLd, d) += w v_i; kAcc likewise with kPre (null unless
// merge=kv); headMass (nKv, keepLd, G) += gi * attn[g * G + r, i] per query head r of the group. Sums
// zeroed by the caller; attn (heads, n), mass (nKv, n) f32.
extern "C" __global__ void kvc_merge_acc(float* __restrict__ weight, float* __restrict__ vAcc,
                                         float* __restrict__ kAcc, float* __restrict__ headMass,
                                         const int* __restrict__ target, const int* __restrict__ drop, int nDrop,
                                         const int* __restrict__ keep, int keepLd, const float* __restrict__ attn,
                                         const float* __restrict__ mass, const bf16* __restrict__ kPre,
                                         const bf16* __restrict__ v, const int* __restrict__ pageTable, int n,
                                         int nKv, int G, int d, int pageSize) {
  const long long w = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (w >= (long long)nKv * nDrop) return;
  const int g = (int)(w / nDrop), t = target[w];
  if (t < 0) return;
  const int slot = drop[w];
  const size_t at = (size_t)g * keepLd + t;
  const size_t oi = kv_offset(pageTable, slot, g, nKv, pageSize, d);
  const size_t ot = kv_offset(pageTable, keep[at], g, nKv, pageSize, d);
  float xy = 0.f, xx = 0.f, yy = 0.f;
  for (int e = lane; e < d; e += 32) {
    const float x = bf2f(v[oi + e]), y = bf2f(v[ot + e]);
    xy += x * y;
    xx += x * x;
    yy += y * y;
  }
  xy = warp_sum(xy);
  xx = warp_sum(xx);
  yy = warp_sum(yy);
  const float gate = xx > 0.f && yy > 0.f ? fmaxf(xy / sqrtf(xx * yy), 0.f) : 0.f;
  if (gate == 0.f) return;  // dropped: neither value nor mass
  const float wi = gate * mass[(size_t)g * n + slot];
  if (lane == 0) atomicAdd(&weight[at], wi);
  if (lane < G) atomicAdd(&headMass[at * G + lane], gate * attn[(size_t)(g * G + lane) * n + slot]);
  for (int e = lane; e < d; e += 32) {
    atomicAdd(&vAcc[at * d + e], wi * bf2f(v[oi + e]));
    if (kAcc) atomicAdd(&kAcc[at * d + e], wi * bf2f(kPre[oi + e]));
  }
}

// Applies the merge to selected token t = from + blockIdx.x of KV head g = blockIdx.y: with W = weight > 0,
// v = (A_t v + vAcc) / (A_t + W), A_t = mass[g, slot] (and kPre with kAcc, kRope re-rotated at the slot's
// position slot + posOffset); per query head h = g * G + r: bias (slots, nHeads) += alpha * log((a + m) / a),
// a = attn[h, slot] (at least 1e-30), m = headMass, when m > 0 and alpha != 0.
extern "C" __global__ void kvc_merge_apply(bf16* __restrict__ kPre, bf16* __restrict__ kRope, bf16* __restrict__ v,
                                           float* __restrict__ bias, const float* __restrict__ weight,
                                           const float* __restrict__ vAcc, const float* __restrict__ kAcc,
                                           const float* __restrict__ headMass, const int* __restrict__ keep,
                                           int keepLd, int from, const float* __restrict__ attn,
                                           const float* __restrict__ mass, const int* __restrict__ pageTable,
                                           const float* __restrict__ invFreq, int posOffset, int n, int nKv, int G,
                                           int d, int pageSize, double alpha) {
  const int t = from + blockIdx.x, g = blockIdx.y, half = d / 2;
  const size_t at = (size_t)g * keepLd + t;
  const int slot = keep[at];
  const size_t o = kv_offset(pageTable, slot, g, nKv, pageSize, d);
  const float W = weight[at];
  if (W > 0.f) {
    const float A = mass[(size_t)g * n + slot], inv = 1.f / (A + W);
    for (int e = threadIdx.x; e < d; e += blockDim.x) v[o + e] = f2bf((A * bf2f(v[o + e]) + vAcc[at * d + e]) * inv);
    if (kAcc) {
      const int pos = slot + posOffset;
      for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float x1 = (A * bf2f(kPre[o + i]) + kAcc[at * d + i]) * inv;
        float x2 = (A * bf2f(kPre[o + half + i]) + kAcc[at * d + half + i]) * inv;
        float c, s;
        rope_cs(pos, invFreq[i], &c, &s);
        kPre[o + i] = f2bf(x1);
        kPre[o + half + i] = f2bf(x2);
        // rotated from the f32 merged key, as the CPU rotates its f32 key
        kRope[o + i] = f2bf(__fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
        kRope[o + half + i] = f2bf(__fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
      }
    }
  }
  if (alpha == 0.0) return;
  for (int r = threadIdx.x; r < G; r += blockDim.x) {
    const float m = headMass[at * G + r];
    if (m <= 0.f) continue;
    const int h = g * G + r;
    const double a = fmax((double)attn[(size_t)h * n + slot], 1e-30);
    bias[(size_t)slot * (nKv * G) + h] += (float)(alpha * log((a + m) / a));
  }
}
