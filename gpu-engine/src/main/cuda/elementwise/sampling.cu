// Picking the next token on the device, so that a decode step returns only the token id.
// CPU twins: engine/spi/Sampler.argmax (greedy) and CpuOps.topPIndexOrder (top-p).
// A JSON-schema request's allowed tokens come as a bitset, mask (ceil(vocab / 64) * 2) u32, bit i of word i / 32
// (the little-endian view of Sampler's long words): the logits of the others read as -infinity and a top-p
// nucleus keeps no token of probability 0, as engine/spi/Sampler does with a mask. mask null: every token.
#include "../common/common.cuh"

#define SAMPLE_THREADS 1024

__device__ __forceinline__ float masked_logit(const float* __restrict__ logits, const unsigned* __restrict__ mask,
                                              int i) {
  return mask == nullptr || (mask[i >> 5] >> (i & 31) & 1u) ? logits[i] : -INFINITY;
}

// token[0] = argmax(logits), the lowest id on ties. One block.
__device__ __forceinline__ void argmax_block(int* __restrict__ token, const float* __restrict__ logits, int vocab,
                                             const unsigned* __restrict__ mask) {
  __shared__ float bv[32];
  __shared__ int bi[32];
  float best = -INFINITY;
  int idx = 0x7fffffff;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    float v = masked_logit(logits, mask, i);
    if (v > best) best = v, idx = i;  // ascending i per thread: the first maximum stays
  }
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, best, o);
    int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > best || (ov == best && oi < idx)) best = ov, idx = oi;
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) bv[warp] = best, bi[warp] = idx;
  __syncthreads();
  if (warp == 0) {
    int nw = blockDim.x >> 5;
    best = lane < nw ? bv[lane] : -INFINITY;
    idx = lane < nw ? bi[lane] : 0x7fffffff;
    for (int o = 16; o > 0; o >>= 1) {
      float ov = __shfl_xor_sync(0xffffffffu, best, o);
      int oi = __shfl_xor_sync(0xffffffffu, idx, o);
      if (ov > best || (ov == best && oi < idx)) best = ov, idx = oi;
    }
    if (lane == 0) token[0] = idx == 0x7fffffff ? 0 : idx;
  }
}

// Top-p (nucleus) sampling with temperature, one block. probs (vocab) f32 is scratch.
//   p = softmax(logits * invTemp); the nucleus is {i : p_i >= t} for the largest t whose kept
//   mass reaches topP (found by bisection on the bits of t, exact for positive floats); the token
//   is the first id, in id order, at which the running kept mass exceeds u * kept mass. u in
//   [0, 1) comes from the host's seeded generator, so no state lives on the device.
__device__ __forceinline__ void top_p_block(int* __restrict__ token, float* __restrict__ probs,
                                            const float* __restrict__ logits, int vocab, float invTemp, float topP,
                                            float u, const unsigned* __restrict__ mask) {
  __shared__ float red[32];
  __shared__ float scan[SAMPLE_THREADS];
  const int tid = threadIdx.x;
  float m = -INFINITY;
  for (int i = tid; i < vocab; i += blockDim.x) m = fmaxf(m, masked_logit(logits, mask, i));
  m = block_max(m, red);
  float z = 0.f;
  for (int i = tid; i < vocab; i += blockDim.x) {
    float e = expf((masked_logit(logits, mask, i) - m) * invTemp);
    probs[i] = e;
    z += e;
  }
  z = block_sum(z, red);
  float invZ = 1.f / z;
  for (int i = tid; i < vocab; i += blockDim.x) probs[i] *= invZ;
  __syncthreads();

  unsigned lo = 0, hi = 0x3f800001u;  // mass(p >= bits lo) >= topP holds; find the largest such lo
  if (topP < 1.f) {
    while (hi - lo > 1) {
      unsigned mid = lo + (hi - lo) / 2;
      float t = __uint_as_float(mid);
      float mass = 0.f;
      for (int i = tid; i < vocab; i += blockDim.x) mass += probs[i] >= t ? probs[i] : 0.f;
      mass = block_sum(mass, red);
      if (mass >= topP) lo = mid; else hi = mid;
    }
  }
  const float t = __uint_as_float(lo);
  // with a mask a zero probability is never kept (the masked tokens', exactly 0); without one, as before
  const float keepAbove = mask == nullptr ? -1.f : 0.f;

  // kept mass per thread over a contiguous range of ids, then an exclusive scan over threads
  const int per = (vocab + blockDim.x - 1) / blockDim.x;
  const int a = tid * per, b = min(vocab, a + per);
  float mine = 0.f;
  for (int i = a; i < b; i++) mine += probs[i] >= t && probs[i] > keepAbove ? probs[i] : 0.f;
  scan[tid] = mine;
  __syncthreads();
  for (int off = 1; off < blockDim.x; off <<= 1) {
    float add = tid >= off ? scan[tid - off] : 0.f;
    __syncthreads();
    scan[tid] += add;
    __syncthreads();
  }
  const float total = scan[blockDim.x - 1];
  const float target = u * total;
  const float before = scan[tid] - mine;
  __shared__ int chosen;
  if (tid == 0) chosen = -1;
  __syncthreads();
  if (before <= target && target < before + mine) {
    float acc = before;
    int pick = -1, last = -1;
    for (int i = a; i < b; i++) {
      if (probs[i] >= t && probs[i] > keepAbove) {
        last = i;
        acc += probs[i];
        if (target < acc) {
          pick = i;
          break;
        }
      }
    }
    atomicMax(&chosen, pick >= 0 ? pick : last);
  }
  __syncthreads();
  if (tid == 0) {
    int c = chosen;
    if (c < 0) {  // rounding put the target past the end: take the last kept id
      for (int i = vocab - 1; i >= 0; i--)
        if (probs[i] >= t && probs[i] > keepAbove) {
          c = i;
          break;
        }
    }
    token[0] = c < 0 ? 0 : c;
  }
}

extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
    argmax_f32(int* __restrict__ token, const float* __restrict__ logits, int vocab) {
  argmax_block(token, logits, vocab, nullptr);
}

extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_top_p(int* __restrict__ token, float* __restrict__ probs, const float* __restrict__ logits, int vocab,
                 float invTemp, float topP, float u) {
  top_p_block(token, probs, logits, vocab, invTemp, topP, u, nullptr);
}

// The same picks restricted to the tokens of mask (see the top of this file).
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
    argmax_masked_f32(int* __restrict__ token, const float* __restrict__ logits, int vocab,
                      const unsigned* __restrict__ mask) {
  argmax_block(token, logits, vocab, mask);
}

extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_top_p_masked(int* __restrict__ token, float* __restrict__ probs, const float* __restrict__ logits, int vocab,
                        float invTemp, float topP, float u, const unsigned* __restrict__ mask) {
  top_p_block(token, probs, logits, vocab, invTemp, topP, u, mask);
}

// The picks of a batched decode step, one block per row: tokens[b] from logits (rows, vocab) f32 with
// row b's (invTemp, topP, u) from params (rows, 3) f32 in device memory (a CUDA graph replays the
// launch with each step's values); invTemp 0 is greedy. Row b's pick is the one argmax_f32 or
// sample_top_p makes with the same values. probs (rows, vocab) f32 is scratch. Row b is held to its mask,
// masks + b * words, when masked[b] is not 0 (both in device memory the graph reads each replay).
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_rows(int* __restrict__ tokens, float* __restrict__ probs, const float* __restrict__ logits,
                const float* __restrict__ params, int vocab, const unsigned* __restrict__ masks,
                const int* __restrict__ masked, int words) {
  const int b = blockIdx.x;
  const float invTemp = params[3 * b], topP = params[3 * b + 1], u = params[3 * b + 2];
  const float* row = logits + (size_t)b * vocab;
  const unsigned* mask = masked[b] != 0 ? masks + (size_t)b * words : nullptr;
  if (invTemp == 0.f) argmax_block(tokens + b, row, vocab, mask);
  else top_p_block(tokens + b, probs + (size_t)b * vocab, row, vocab, invTemp, topP, u, mask);
}
