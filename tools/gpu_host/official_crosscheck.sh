#!/usr/bin/env bash
# Issue 39 item 3 in one device call (< 3 min on an H200): the engine dumps its TSA and TokenSelect selections
# with their inputs (generate --dump-selections) for one in-distribution prompt of the bundled model, on the
# CUDA backend and on the CPU backend, and tools/gpu_host/official_crosscheck.py recomputes every selection
# with the official code and compares (docs/sparse-policies.md, "Cross-check against the official code").
# From the repository root of the GPU host, with build/bundle (tools/bundle/build-bundle.sh) and .official
# (tools/gpu_host/fetch_official.sh) carried along:
#   tools/gpu_host/official_crosscheck.sh $OUT
# Writes OUT/crosscheck.txt (the table), OUT/crosscheck.json, OUT/engine-*.log and each dump's index.json;
# the dumps themselves (~20 MB each) stay in $DUMPS (default /tmp/crosscheck-dumps). Exit status: the
# script's (0: every difference a tie). On a machine without a GPU:
#   LONGSIEVE_GPU=<launcher> BACKENDS=cpu PYTHONPATH=<triton> PY=<python with torch> [MAX_EVENTS=N] \
#     tools/gpu_host/official_crosscheck.sh OUT
set -uo pipefail
OUT="${1:?usage: official_crosscheck.sh OUT_DIR}"
LS="${LONGSIEVE_GPU:-build/bundle/longsieve-gpu}"
PY="${PY:-python3}"
BACKENDS="${BACKENDS:-cuda cpu}"
DUMPS="${DUMPS:-/tmp/crosscheck-dumps}"
MODEL=models/longsieve-needle-7m
mkdir -p "$OUT" "$DUMPS"
T0=$(date +%s)
# one single-needle document at the model's training length (the suite's first, seed 6): ~1900 prompt tokens
"$LS" eval-engine --model $MODEL --output "$DUMPS/suite" --tasks niah_single --lengths 1 --per-cell 1 \
  --write-suite-only >"$OUT/engine-suite.log" 2>&1 || { echo "suite failed"; tail "$OUT/engine-suite.log"; exit 2; }
PROMPT="$("$PY" -c 'import json, sys; d = json.loads(open(sys.argv[1]).readline()); print(d["text"] + "\n\n" + d["question"])' \
  "$DUMPS/suite/eval/suite.jsonl")"
# TSA as officially configured but every layer sparse, whole prompt one selection (chunk 4096 > prompt) and in
# 1024-token chunks (the engine's chunk scope); TokenSelect in the official configuration (gqa=mod: the
# official kernel's h % nKv) with k small enough to select, without and with the official max-pool
POLICIES=("tsa:layers=all" "tsa:layers=all,chunk=1024" "tokenselect:k=256,gqa=mod" "tokenselect:k=256,gqa=mod,pool=6")
DIRS=()
for backend in $BACKENDS; do
  for i in "${!POLICIES[@]}"; do
    dir="$DUMPS/$backend-$i"; rm -rf "$dir"
    timeout 120 "$LS" generate --model $MODEL --device "$backend" --prompt "$PROMPT" --policy "${POLICIES[$i]}" \
      --max-new-tokens 6 --dump-selections "$dir" --stats >"$OUT/engine-$backend-$i.log" 2>&1
    rc=$?; echo "engine $backend ${POLICIES[$i]}: rc=$rc $(grep -c '"id"' "$dir/index.json" 2>/dev/null) selections"
    [[ $rc == 0 ]] && DIRS+=("$dir") && cp "$dir/index.json" "$OUT/index-$backend-$i.json"
  done
done
echo "engine dumps in $(( $(date +%s) - T0 )) s"
T1=$(date +%s)
"$PY" tools/gpu_host/official_crosscheck.py --official .official --json "$OUT/crosscheck.json" ${MAX_EVENTS:+--max-events $MAX_EVENTS} "${DIRS[@]}" \
  >"$OUT/crosscheck.txt" 2>&1
rc=$?
echo "official cross-check rc=$rc in $(( $(date +%s) - T1 )) s"
grep -E "^(summary|skipped|OK|FAIL|official_crosscheck)|Error|error" "$OUT/crosscheck.txt" | cut -c1-250 | head -40
exit $rc
