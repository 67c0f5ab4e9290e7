// The one compilation unit of the fatbin (nvcc -fatbin takes a single source): every kernel file
// of this folder, included in turn. gpu-engine/pom.xml runs build-fatbin.sh on it.
#include "elementwise.cu"
#include "gemm.cu"
#include "prefill_attention.cu"
#include "split_attention.cu"
#include "decode_attention.cu"
#include "sampling.cu"
#include "list_attention.cu"
#include "quest.cu"
#include "tsa.cu"
#include "kv_compress.cu"
#include "tokenselect.cu"
#include "ts_score.cu"
