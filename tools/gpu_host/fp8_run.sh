#!/usr/bin/env bash
# Issue 39 (FP8) on a GPU host, from the repository root with the bundle at build/bundle (which carries
# bench_fp8_peer.py): the steps named, in order, each under its own time limit, logs and results under OUT.
#   suite    the FP8 gpu tests: kernels against their CPU twins (Fp8ParityTest), the forward pass on the
#            tiny FP8 checkpoints against the CPU reference (Fp8ForwardParityTest), and the bf16 suites the
#            FP8 change touched (HopperLaunchParityTest, MatmulParityTest, ForwardParityTest)
#   bench    torch._scaled_mm / torch.matmul peer (bench_fp8_peer.py, merged into bench_torch_peer.py's
#            file when that ran first in OUT) and `longsieve bench --fp8 --skip-dense` on the 8B and 70B shapes
#   e2e8b    HF transformers (bf16) against the engine on the FP8 quantization of the same random 8B
#            checkpoint (make_fp8_checkpoint.py --from, bench_e2e.py --engine-ckpt), then the bf16 engine on
#            the bf16 checkpoint, and the greedy agreement of the two engines (fp8_agreement.py)
#   e2e70b   a random 70B-shaped FP8 checkpoint (FP8_70B, default /dev/shm/llama70b-fp8, ~72 GB: needs the
#            disk or memory for it) through `generate` at 32K and 128K, 64 tokens, against its FP8 floors
#            (fp8_floors.py, from the ceilings the bench step left in OUT/peer.json)
#   tools/gpu_host/fp8_run.sh OUT suite bench e2e8b e2e70b
set -uo pipefail
OUT="$(realpath -m "${1:?OUT}")"; shift
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
export PYTHONUNBUFFERED=1
B=build/bundle
CK8="${E2E_CKPT:-/tmp/longsieve-e2e-llama8b}"
date -u; nvidia-smi --query-gpu=name,driver_version,memory.used,clocks.sm --format=csv; df -h /tmp /dev/shm | tail -2
for step in "$@"; do
  t=$(date +%s); echo "== $step"
  case "$step" in
    suite)
      timeout "${T_SUITE:-400}" $B/longsieve-gpu test "$OUT/reports" Fp8ParityTest Fp8ForwardParityTest \
        HopperLaunchParityTest MatmulParityTest ForwardParityTest >"$OUT/suite.txt" 2>&1; echo "suite rc=$?"
      grep -E "tests (successful|failed|aborted|found)|relative error|greedy tokens" "$OUT/suite.txt" | head -60
      grep -B2 -A12 "✘" "$OUT/suite.txt" | head -80 ;;
    bench)
      timeout 150 python3 $B/bench_fp8_peer.py --merge-into "$OUT/peer.json"; echo "peer rc=$?"
      timeout "${T_BENCH:-300}" $B/longsieve-gpu bench --fp8 --skip-dense --peer "$OUT/peer.json" --csv "$OUT/fp8-bench.csv"
      echo "bench rc=$?" ;;
    e2e8b)
      OUT="$OUT/e2e-bf16" tools/gpu_host/bench_e2e.sh --docs 32k,128k --new-tokens 64 --policies dense --skip-hf
      [[ -d "$CK8-fp8" ]] || timeout 300 python3 tools/gpu_host/make_fp8_checkpoint.py --from "$CK8" --out "$CK8-fp8"
      OUT="$OUT/e2e-fp8" tools/gpu_host/bench_e2e.sh --docs 32k,128k --new-tokens 64 --policies dense --engine-ckpt "$CK8-fp8"
      python3 tools/gpu_host/fp8_agreement.py "$OUT/e2e-bf16/engine-0.log" "$OUT/e2e-fp8/engine-0.log" | tee "$OUT/agreement.txt"
      cp "$OUT/e2e-fp8/e2e.md" "$OUT/e2e-fp8.md" 2>/dev/null ;;
    e2e70b)
      CK70="${FP8_70B:-/dev/shm/llama70b-fp8}"
      [[ -f "$CK70/longsieve-fp8.json" ]] || timeout 540 python3 tools/gpu_host/make_fp8_checkpoint.py --shape 70b --out "$CK70"
      python3 - "$OUT" <<'PY'
import sys; sys.path.insert(0, "tools/gpu_host"); import bench_e2e as E
for name, n in E.parse_docs("32k,128k"):
    open(f"{sys.argv[1]}/doc70-{name}.ids", "w").write(" ".join(map(str, E.doc_ids(n, 39))) + "\n")
PY
      timeout 540 $B/longsieve-gpu generate --model "$CK70" --device cuda --ignore-eos --max-new-tokens 64 \
        --prefill-chunk 4096 --warmup-tokens 4096 --prompt-ids "$OUT/doc70-32k.ids" --prompt-ids "$OUT/doc70-128k.ids" \
        --stats-json "$OUT/e2e70b.jsonl" >"$OUT/e2e70b.log" 2>&1; echo "generate rc=$?"
      cat "$OUT/e2e70b.jsonl"
      [[ -f "$OUT/peer.json" ]] && python3 tools/gpu_host/fp8_floors.py --shape 70b --stats "$OUT/e2e70b.jsonl" \
        --peer "$OUT/peer.json" | tee "$OUT/e2e70b-floors.txt" ;;
    *) echo "unknown step $step" ;;
  esac
  echo "== $step done in $(( $(date +%s) - t )) s"
done
