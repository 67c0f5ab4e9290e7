#!/usr/bin/env bash
# One device call (see bench/RESULTS.md): the gpu test suite, the PyTorch peer, the engine bench and
# a generate smoke test, from the repository root of a GPU host with the bundle at build/bundle.
#   build/bundle/device-run.sh OUT_DIR [test|bench|all] [bench args...]
set -uo pipefail
OUT="${1:?OUT_DIR}"; WHAT="${2:-all}"; shift 2 || true
B="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/all.log") 2>&1
export PYTHONUNBUFFERED=1
date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; uname -m
if [[ "$WHAT" == test || "$WHAT" == all ]]; then
  echo "== gpu test suite"; t=$(date +%s)
  timeout 240 "$B/longsieve-gpu" test "$OUT/reports"; echo "test rc=$? in $(( $(date +%s) - t )) s"
  echo "== generate smoke (llama-gqa, cuda)"
  timeout 60 "$B/longsieve-gpu" generate --model gpu-engine/src/test/resources/models/llama-gqa \
    --prompt "The cat sat on the mat." --raw --max-new-tokens 20 --device cuda --stats; echo "generate rc=$?"
fi
if [[ "$WHAT" == bench || "$WHAT" == all ]]; then
  echo "== torch peer"; t=$(date +%s)
  timeout 200 python3 "$B/bench_torch_peer.py" --out "$OUT/peer.json"; echo "peer rc=$? in $(( $(date +%s) - t )) s"
  echo "== engine bench"; t=$(date +%s)
  timeout 300 "$B/longsieve-gpu" bench --peer "$OUT/peer.json" --csv "$OUT/bench.csv" "$@"
  echo "bench rc=$? in $(( $(date +%s) - t )) s"
fi
