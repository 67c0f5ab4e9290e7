// Merging split attention's partial outputs into the final rows: attn_combine (split_attention.cu) and the
// fused merge of list_decode.cu's last block per (row, KV head). Its own header because both paths merge the
// same partial format (attn_tile.cuh's tile_merge_warps_at and split_store write it) and should merge alike.
#pragma once
#include "common.cuh"

// out[d .. d + 3] bf16 = dims d .. d + 3 of one head row's merged attention output: the splits
// first .. first + splits - 1 of partO (.., D) f32 unnormalised and partML (.., 2) f32 (max, sum), natural
// log. One thread per (head row, four dims), no block-wide step: it loads BATCH splits' (max, sum) and
// outputs at once (one L2 round trip per batch, not one per split) and rescales online from batch to
// batch. L2 loads (__ldcg): other blocks may have written the partials in this very launch. Empty splits
// (max -inf) weigh 0; an all-empty row gives 0.
template <int BATCH>
__device__ __forceinline__ void merge_splits4(bf16* __restrict__ out, const float* __restrict__ partO,
                                              const float* __restrict__ partML, size_t first, int splits, int D,
                                              int d) {
  const float2* ml = reinterpret_cast<const float2*>(partML) + first;
  const float* po = partO + first * D + d;
  float M = -INFINITY, L = 0.f;  // natural-log max so far, and the sum rescaled to it
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int sp0 = 0; sp0 < splits; sp0 += BATCH) {
    float2 m[BATCH];
    float4 v[BATCH];
#pragma unroll
    for (int u = 0; u < BATCH; u++) {
      const int sp = sp0 + u;
      m[u] = sp < splits ? __ldcg(ml + sp) : make_float2(-INFINITY, 0.f);
      v[u] = sp < splits ? __ldcg(reinterpret_cast<const float4*>(po + (size_t)sp * D)) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float Mn = M;
#pragma unroll
    for (int u = 0; u < BATCH; u++) Mn = fmaxf(Mn, m[u].x);
    if (Mn == -INFINITY) continue;  // only empty splits so far
    const float a = M == -INFINITY ? 0.f : __expf(M - Mn);
    acc.x *= a;
    acc.y *= a;
    acc.z *= a;
    acc.w *= a;
    L *= a;
#pragma unroll
    for (int u = 0; u < BATCH; u++) {
      const float w = m[u].x == -INFINITY ? 0.f : __expf(m[u].x - Mn);
      acc.x = fmaf(w, v[u].x, acc.x);
      acc.y = fmaf(w, v[u].y, acc.y);
      acc.z = fmaf(w, v[u].z, acc.z);
      acc.w = fmaf(w, v[u].w, acc.w);
      L = fmaf(w, m[u].y, L);
    }
    M = Mn;
  }
  const float inv = L > 0.f ? 1.f / L : 0.f;
  *reinterpret_cast<uint2*>(out + d) =
      make_uint2(pack_bf16(acc.x * inv, acc.y * inv), pack_bf16(acc.z * inv, acc.w * inv));
}
