#!/usr/bin/env bash
# Nsight Compute profiles of TokenSelect's decode kernels at 128K (Llama-3.1-8B shapes, the sparse bench):
# one profiled launch per kernel (the 5th), caches flushed before it (ncu's default), so the durations are
# cold-L2 figures of one call. Run from the repository root with the bundle at build/bundle and OUT set:
#   OUT=/tmp/ncu tools/gpu_host/ncu_tokenselect.sh [kernel ...]     (default: the decode step's kernels)
set -o pipefail
B=build/bundle; mkdir -p $OUT
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"; $NCU --version | tail -1
KERNELS=("$@")
[ ${#KERNELS[@]} -eq 0 ] && KERNELS=(ts_decode_front ts_score_d128 ts_score_int4_d128 ts_votes ts_topk_lists list_decode_d128_compact)
for k in "${KERNELS[@]}"; do
  t=$(date +%s)
  timeout 110 $NCU --target-processes all --clock-control none --kill on -k "regex:^$k\$" --launch-skip 4 --launch-count 1 \
    --set full $B/longsieve-gpu bench --skip-dense --sparse --skip-model --contexts 131072 > $OUT/$k.txt 2>&1
  echo "$k rc=$? in $(( $(date +%s) - t )) s"
  grep -E "^    (Duration|DRAM Throughput|Memory Throughput|Registers Per Thread|Grid Size|Block Size|Achieved Occupancy|Warp Cycles Per Issued Instruction) " $OUT/$k.txt
done
