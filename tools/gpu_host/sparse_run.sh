#!/usr/bin/env bash
# Issue 5 on a GPU host (the device call of bench/RESULTS.md, "Sparse attention on the GPU"): the whole gpu
# suite, the sparse benchmark (8B shapes, 32K-128K, end-to-end decode at 128K) and TokenSelect's int4 index on
# the trained model. Run from the repository root with the bundle at build/bundle and OUT set to a folder.
set -o pipefail
B=build/bundle; mkdir -p $OUT
T0=$(date +%s)
timeout 260 $B/longsieve-gpu test /tmp/reports > $OUT/test.log 2>&1
echo "tests rc=$? in $(( $(date +%s) - T0 )) s"
sed 's/\x1b\[[0-9;]*m//g' $OUT/test.log | grep -E "✘" | cut -c1-230 | head -30
sed 's/\x1b\[[0-9;]*m//g' $OUT/test.log | grep -E "tests (successful|failed)"
T1=$(date +%s)
timeout 200 $B/longsieve-gpu bench --skip-dense --sparse --contexts 32768,65536,131072 --decode-steps 8 --csv $OUT/bench.csv > $OUT/bench.log 2>&1
echo "bench rc=$? in $(( $(date +%s) - T1 )) s"
grep -E "^  (tokenselect|end-to-end)|failed|took|target" $OUT/bench.log | sed 's/ | TFLOP\/s NaN//; s/ | peer ms NaN//' | cut -c1-200 | head -80
T2=$(date +%s)
timeout 90 $B/longsieve-gpu eval-engine --model models/longsieve-needle-7m --output /tmp/q --lengths 1,2,4 --per-cell 2 --policies "tokenselect;tokenselect:index=int4;tokenselect:k_frac=0.2,sinks=16,window=64;tokenselect:k_frac=0.2,sinks=16,window=64,index=int4" --device cuda > $OUT/eval.log 2>&1
echo "eval rc=$? in $(( $(date +%s) - T2 )) s"; grep -A8 "mean @\|Mean attended" /tmp/q/eval/results.md | head -30
cp /tmp/q/eval/results.md /tmp/q/eval/docs.jsonl $OUT/ 2>/dev/null
