#!/usr/bin/env bash
# Issue 6 on a GPU host (bench/RESULTS.md, "Quality", GPU table): the whole gpu suite, then the quality suite at
# 1x-8x for the standard policies plus TokenSelect with score=rope, 4 documents per cell, on the GPU kernels.
# Run from the repository root with the bundle at build/bundle and OUT set to a folder.
export OUT; B=build/bundle; T0=$(date +%s)
timeout 270 $B/longsieve-gpu test /tmp/r > $OUT/test.log 2>&1; echo "tests rc=$? $(( $(date +%s)-T0 ))s"
sed 's/\x1b\[[0-9;]*m//g' $OUT/test.log | grep -E "✘" | cut -c1-220 | head -30; sed 's/\x1b\[[0-9;]*m//g' $OUT/test.log | grep -E "tests (successful|failed|found)"
T2=$(date +%s)
timeout 280 $B/longsieve-gpu eval-engine --model models/longsieve-needle-7m --output /tmp/q --lengths 1,2,4,8 --per-cell 4 --policies standard --policy "tokenselect:k_frac=0.05,sinks=16,window=64,score=rope" --policy "tokenselect:k_frac=0.1,sinks=16,window=64,score=rope" --policy "tokenselect:k_frac=0.2,sinks=16,window=64,score=rope" --policy "tokenselect:score=rope" --device cuda > $OUT/eval.log 2>&1
echo "eval rc=$? in $(( $(date +%s) - T2 )) s"; grep -B2 -A8 "mean @" /tmp/q/eval/results.md | head -60
cp /tmp/q/eval/results.md /tmp/q/eval/docs.jsonl /tmp/q/eval/results.jsonl $OUT/ 2>/dev/null; ls -la $OUT
