// The one compilation unit of the fatbin (nvcc -fatbin takes a single source): every kernel file
// of this folder, included in turn. gpu-engine/pom.xml runs tools/build-kernels.sh on it.
#include "elementwise.cu"
#include "gemm.cu"
#include "attention.cu"
#include "decode.cu"
#include "sampling.cu"
