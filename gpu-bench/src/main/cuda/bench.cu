// The one compilation unit of the bench fatbin (longsieve_bench.fatbin, build-bench-fatbin.sh):
// kernels only benchmarks use, kept out of the engine's fatbin.
//   list_floor.cu   the memory floor of list attention's gathers (ListFloor, ListAttentionBench)
#include "list_floor.cu"
