// Token Sparse Attention, step 3 of 3 (the whole pipeline is listed in tsa.cu): the copies around
// the dense prefill kernel. tsa_gather turns each query head's list (from tsa_select.cu) into a dense
// paged cache and dense query rows, flash_prefill_heads_d* attends over them, tsa_scatter writes the
// rows back; tsa_fill_i32 presets the row map and the identity page table. Apart from the rest because
// these are plain 16-byte copies with no arithmetic (memory bound, addressed through kv_offset).
#include "../common/common.cuh"

// Grid (x, nHeads), block 256, 16-byte chunks. With len = info[0] + w and f = info[2 + h]:
// Kc/Vc (pages, nHeads, 64, D) bf16 = the head's list entries e at slot e (a paged cache with nKv =
// nHeads and the identity page table); Qc (n, nHeads, D) bf16 row e - f = the query of entry e >= f;
// rowMap (n, nHeads) int (preset to -1) = that row for the chunk row of entry e.
extern "C" __global__ void tsa_gather(bf16* Kc, bf16* Vc, bf16* Qc, int* rowMap, const int* lists, const int* info,
                                      const bf16* Q, const bf16* K, const bf16* V, const int* pageTable, int nHeads,
                                      int nKv, int D, int pageSize, int before, int w) {
  const int h = blockIdx.y, len = info[0] + w, f = info[2 + h], kvh = h / (nHeads / nKv), cpr = D / 8;
  const int* list = lists + (size_t)h * len;
  for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < (long long)len * cpr;
       idx += (long long)gridDim.x * blockDim.x) {
    const int e = (int)(idx / cpr), c = (int)(idx % cpr) * 8, slot = list[e];
    const size_t src = kv_offset(pageTable, slot, kvh, nKv, pageSize, D) + c;
    const size_t dst = (((size_t)(e / 64) * nHeads + h) * 64 + (e % 64)) * D + c;
    *reinterpret_cast<uint4*>(Kc + dst) = *reinterpret_cast<const uint4*>(K + src);
    *reinterpret_cast<uint4*>(Vc + dst) = *reinterpret_cast<const uint4*>(V + src);
    if (e >= f) {
      const int row = slot - before;
      *reinterpret_cast<uint4*>(Qc + ((size_t)(e - f) * nHeads + h) * D + c) =
          *reinterpret_cast<const uint4*>(Q + ((size_t)row * nHeads + h) * D + c);
      if (c == 0) rowMap[(size_t)row * nHeads + h] = e - f;
    }
  }
}

// out (n, nHeads, D) bf16 = Oc row rowMap[r, h] of head h, or zeros where the row is not in the head's list.
extern "C" __global__ void tsa_scatter(bf16* out, const bf16* Oc, const int* rowMap, int n, int nHeads, int D) {
  const int cpr = D / 8;
  for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < (long long)n * nHeads * cpr;
       idx += (long long)gridDim.x * blockDim.x) {
    const long long rh = idx / cpr;
    const int c = (int)(idx % cpr) * 8, h = (int)(rh % nHeads), i = rowMap[rh];
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (i >= 0) v = *reinterpret_cast<const uint4*>(Oc + ((size_t)i * nHeads + h) * D + c);
    *reinterpret_cast<uint4*>(out + rh * D + c) = v;
  }
}

// p (count) int = value, or p[i] = i when iota (the identity page table of the gathered cache).
extern "C" __global__ void tsa_fill_i32(int* p, int count, int value, int iota) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) p[i] = iota ? i : value;
}
