#!/usr/bin/env bash
# Issue 15 item 4 on a GPU host, one device call (<= 9 minutes): HF transformers against the engine on the
# same random-weight Llama-3.1-8B checkpoint and token ids (tools/gpu_host/bench_e2e.py says what it does).
# Run from the repository root with the bundle at build/bundle (tools/bundle/build-bundle.sh) and OUT set:
#   OUT=/tmp/e2e tools/gpu_host/bench_e2e.sh [bench_e2e.py flags, e.g. --docs 32k --new-tokens 64]
# Writes $OUT/e2e.md (the tables), e2e.csv, e2e.json and one log per step; the checkpoint goes to
# ${E2E_CKPT:-/tmp/longsieve-e2e-llama8b} (16 GB) and is reused by a later run on the same host.
set -o pipefail
OUT="${OUT:?set OUT to a folder}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>/dev/null | tee "$OUT/gpu.txt"
df -h /tmp | tail -1
python3 -c 'import torch, transformers, safetensors; print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available())' \
  || { echo "bench_e2e: python3 lacks torch/transformers/safetensors"; exit 3; }
timeout 535 python3 tools/gpu_host/bench_e2e.py --out "$OUT" --ckpt "${E2E_CKPT:-/tmp/longsieve-e2e-llama8b}" "$@" 2>&1 | tee "$OUT/e2e.log"
rc=${PIPESTATUS[0]}
echo "bench_e2e rc=$rc in $(( $(date +%s) - T0 )) s"
exit $rc
