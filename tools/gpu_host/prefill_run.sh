#!/usr/bin/env bash
# Issue 15 on a GPU host, from the repository root with the bundle at build/bundle: the steps named,
# in order, each under its own time limit, logs and results under OUT (at most 8 files come back).
#   check   the sm_90a kernels alone (tools/gpu_host/sm90_check.cu): parity with fp32 reference
#           kernels on ragged sizes, then CUDA-event timings on the Llama-3.1-8B prefill shapes
#   suite   the gpu-tagged JUnit suite through the bundle (every kernel against its CPU twin)
#   bench   the PyTorch peer (SDPA default and flash-only backends, torch.matmul) and the engine bench
#   e2e     HF transformers against the engine on one random-weight 8B checkpoint (bench_e2e.sh)
#   tools/gpu_host/prefill_run.sh OUT check suite bench e2e
set -uo pipefail
OUT="$(realpath -m "${1:?OUT}")"; shift
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
export PYTHONUNBUFFERED=1
date -u; nvidia-smi --query-gpu=name,driver_version,memory.used,clocks.sm --format=csv
for step in "$@"; do
  t=$(date +%s); echo "== $step"
  case "$step" in
    check)
      nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a tools/gpu_host/sm90_check.cu -lcuda -o /tmp/sm90_check \
        && cuobjdump -sass /tmp/sm90_check | awk '/Function : /{f=$3} /HGMMA/{h[f]++} END{for (k in h) print "sass", k, "HGMMA", h[k]}'
      timeout 120 /tmp/sm90_check check; echo "check rc=$?"
      timeout 240 /tmp/sm90_check time; echo "time rc=$?" ;;
    suite)
      timeout "${T_SUITE:-330}" build/bundle/longsieve-gpu test "$OUT/reports" >"$OUT/suite.txt" 2>&1; echo "suite rc=$?"
      grep -E "tests (successful|failed|aborted|found)|containers failed" "$OUT/suite.txt"
      grep -B2 -A12 "✘" "$OUT/suite.txt" | head -80
      (cd "$OUT" && tar -czf reports.tgz reports && rm -rf reports) ;;
    bench)
      timeout 200 python3 build/bundle/bench_torch_peer.py --out "$OUT/peer.json"; echo "peer rc=$?"
      timeout "${T_BENCH:-240}" build/bundle/longsieve-gpu bench --peer "$OUT/peer.json" --csv "$OUT/bench.csv" ${BENCH_ARGS:-}
      echo "bench rc=$?" ;;
    e2e)
      OUT="$OUT/e2e" tools/gpu_host/bench_e2e.sh ${E2E_ARGS:-}; echo "e2e rc=$?"
      cp "$OUT/e2e/e2e.md" "$OUT/e2e/e2e.csv" "$OUT/e2e/e2e.json" "$OUT/" 2>/dev/null
      (cd "$OUT" && tar -czf e2e-logs.tgz e2e && rm -rf e2e) ;;
    *) echo "unknown step $step" ;;
  esac
  echo "== $step done in $(( $(date +%s) - t )) s"
done
