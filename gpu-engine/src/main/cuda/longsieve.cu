// The one compilation unit of the fatbin (nvcc -fatbin takes a single source): every kernel file,
// family by family, included in turn (the order the files had when they sat in one folder). Each
// file also compiles on its own includes (build-fatbin.sh --check-each); gpu-engine/pom.xml runs
// build-fatbin.sh on this file. The sm_90a kernels (hopper/) are a module of their own,
// hopper/hopper.cu, built as one sm_90a cubin.
//
//   common/       headers only: types, bf16 helpers, attention tiles, split merges
//   elementwise/  norms, RoPE, activations (Kernels), the families' extra steps (FamilyKernels), sampling
//   gemm/         matrix products (Kernels.gemm)
//   prefill/      dense prefill attention (Kernels)
//   decode/       dense, split and list decode attention (Kernels, ListKernels), Quest (QuestKernels)
// (the benchmarks' own kernels are in gpu-bench/src/main/cuda, their own fatbin)
//   tsa/          Token Sparse Attention (TsaKernels)
//   kv/           KV compression: scoring, selection, merging, compaction (KvCompressKernels)
//   select/       TokenSelect: scoring, votes, top-k (SelectKernels)
//   fp8/          FP8 checkpoints: activation quantization, the FP8-weight decode GEMV (Fp8Kernels)
#include "elementwise/elementwise.cu"
#include "elementwise/family.cu"
#include "gemm/gemm.cu"
#include "prefill/prefill_attention.cu"
#include "decode/split_attention.cu"
#include "decode/decode_attention.cu"
#include "elementwise/sampling.cu"
#include "decode/list_attention.cu"
#include "decode/list_decode.cu"
#include "decode/quest.cu"
#include "tsa/tsa.cu"
#include "tsa/tsa_select.cu"
#include "tsa/tsa_gather.cu"
#include "kv/kv_compress.cu"
#include "kv/kv_select.cu"
#include "kv/kv_merge.cu"
#include "kv/kv_compact.cu"
#include "select/tokenselect.cu"
#include "select/ts_topk.cu"
#include "select/ts_score.cu"
#include "select/ts_score_int4.cu"
#include "select/ts_votes.cu"
#include "fp8/fp8.cu"
