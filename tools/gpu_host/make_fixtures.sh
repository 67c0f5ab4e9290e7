#!/usr/bin/env bash
# Runs the fixture generators on a host that has PyTorch + transformers + tokenizers + safetensors
# (the GPU host; everything runs on CPU) and packs the results into ONE tar file in $OUT:
#   fixtures.tar: ./models/<name>/...  -> gpu-engine/src/test/resources/models/<name>/
# Also re-checks the goldens with the torch-free numpy reference (tools/verify_goldens_numpy.py).
# Usage (repo root): OUT=/some/dir bash tools/gpu_host/make_fixtures.sh
set -uo pipefail
: "${OUT:?set OUT to the folder that receives fixtures.tar and the logs}"
export CUDA_VISIBLE_DEVICES="" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONHASHSEED=0 OMP_NUM_THREADS=1
WORK=$(mktemp -d)
rc=0
python3 -c 'import sys, torch, transformers, tokenizers, safetensors, numpy; print(sys.version); print("torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "safetensors", safetensors.__version__, "numpy", numpy.__version__)' 2>&1 | tee "$OUT/versions.log"
python3 tools/make_tiny_checkpoints.py --out "$WORK/models" > "$OUT/make_tiny_checkpoints.log" 2>&1 || rc=1
tail -n 60 "$OUT/make_tiny_checkpoints.log"
python3 tools/verify_goldens_numpy.py "$WORK"/models/*/ > "$OUT/verify_goldens_numpy.log" 2>&1 || rc=$((rc + 4))
cat "$OUT/verify_goldens_numpy.log"
tar -cf "$OUT/fixtures.tar" -C "$WORK" .
ls -la "$OUT"
echo "make_fixtures rc=$rc"
exit $rc
