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
  timeout "${T_TEST:-240}" "$B/longsieve-gpu" test "$OUT/reports"; echo "test rc=$? in $(( $(date +%s) - t )) s"
  echo "== generate smoke (llama-gqa, cuda)"
  timeout 60 "$B/longsieve-gpu" generate --model gpu-engine/src/test/resources/models/llama-gqa \
    --prompt "The cat sat on the mat." --raw --max-new-tokens 20 --device cuda --stats; echo "generate rc=$?"
fi
if command -v cuobjdump >/dev/null 2>&1; then  # what the compiler made of the hot kernels (no disassembler here)
  RT="$(ls -d /tmp/longsieve-gpu-* 2>/dev/null | head -1)"
  if [[ -n "$RT" ]]; then
    python3 -c 'import sys, zipfile; open("/tmp/ls.fatbin", "wb").write(zipfile.ZipFile(sys.argv[1]).read("io/longsieve/cuda/longsieve.fatbin"))' \
      "$(ls "$RT"/app/lib/gpu-engine-*.jar | head -1)" && cuobjdump -sass -arch sm_90 /tmp/ls.fatbin >"$OUT/sass.txt" 2>&1
    grep -c "Function" "$OUT/sass.txt"
    for f in gemm_bf16 gemv_bf16_b1_c1 attn_split_g4 flash_prefill_d128; do
      awk -v f="$f" '/Function : /{p=($3==f)} p' "$OUT/sass.txt" | \
        awk -v f="$f" '/HMMA/{h++} /LDG/{l++} /LDGSTS/{a++} /LDSM/{s++} END{print "sass", f, "HMMA", h+0, "LDG", l+0, "LDGSTS", a+0, "LDSM", s+0}'
    done
  fi
fi
if [[ "$WHAT" == bench || "$WHAT" == all ]]; then
  echo "== torch peer"; t=$(date +%s)
  timeout "${T_PEER:-200}" python3 "$B/bench_torch_peer.py" --out "$OUT/peer.json"; echo "peer rc=$? in $(( $(date +%s) - t )) s"
  echo "== engine bench"; t=$(date +%s)
  timeout "${T_BENCH:-300}" "$B/longsieve-gpu" bench --peer "$OUT/peer.json" --csv "$OUT/bench.csv" "$@"
  echo "bench rc=$? in $(( $(date +%s) - t )) s"
fi
