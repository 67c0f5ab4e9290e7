#!/usr/bin/env bash
# Each kernel's GPU time inside whole 128K decode steps of the synthetic 8B model (the sparse bench's end to end),
# dense against TokenSelect: where a step's time goes beyond the per-kernel benchmarks. The timed steps of the
# named policies are profiler ranges (SparseBench.PROFILED); Nsight Systems records them (one report per range),
# or, without it, Nsight Compute times each kernel of one step alone (serialised, so gaps are not seen).
# Run from the repository root with the bundle at build/bundle and OUT set:
#   OUT=/tmp/prof tools/gpu_host/step_profile.sh [policies, default dense,decode=tokenselect]
set -o pipefail
B=build/bundle; mkdir -p $OUT
POLICIES=${1:-dense,decode=tokenselect}
export LONGSIEVE_JAVA_OPTS="-Dlongsieve.bench.profile=$POLICIES"
NSYS=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
mkdir -p /tmp/prof
if [[ -n "$NSYS" ]]; then
  echo "nsys: $NSYS"
  timeout 300 $NSYS profile --capture-range=cudaProfilerApi --capture-range-end=repeat -t cuda -o /tmp/prof/step \
    $B/longsieve-gpu bench --skip-dense --sparse --contexts 131072 --decode-steps 4 > $OUT/nsys.log 2>&1
  echo "nsys rc=$?"
  mkdir -p /tmp/prof; for r in /tmp/prof/step*.nsys-rep; do
    echo "== $r"
    $NSYS stats --report cuda_gpu_kern_sum --format csv --output - "$r" 2>/dev/null | cut -d, -f2-4,9 | head -30
    $NSYS stats --report cuda_gpu_trace --format csv --output $OUT/$(basename $r .nsys-rep)-trace "$r" >/dev/null 2>&1
  done
else
  echo "no nsys; ncu: $NCU"
  timeout 400 $NCU --profile-from-start off --cache-control none --clock-control none --metrics gpu__time_duration.sum \
    --csv $B/longsieve-gpu bench --skip-dense --sparse --contexts 131072 --decode-steps 1 > $OUT/ncu.csv 2> $OUT/ncu.log
  echo "ncu rc=$?"
fi
