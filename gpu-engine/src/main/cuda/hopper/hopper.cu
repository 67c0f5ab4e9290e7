// The sm_90a module: the Hopper kernels, compiled by build-fatbin.sh into longsieve_sm90a.cubin (SASS
// for sm_90a only) and loaded beside the main fatbin on compute capability 9.0 GPUs. A module of its
// own because the driver, given one fatbin with sm_90a SASS and compute_80 PTX, may run the PTX.
#include "gemm_sm90.cu"
#include "gemm_fp8_sm90.cu"
#include "prefill_sm90.cu"

