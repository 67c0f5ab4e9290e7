#!/usr/bin/env bash
# Issue 6 / 19 on a GPU host (bench/RESULTS.md, "Quality", GPU table): the whole gpu suite, then the quality suite
# at 1x-8x for the standard policies plus TokenSelect with score=rope, on the GPU kernels, for the training family
# and the held-out family (--held-out: needle phrasings, questions and haystack kinds the model never trained on),
# each with its own results.md; the same documents for every policy within a family.
# Run from the repository root with the bundle at build/bundle and OUT set to a folder.
# Env: FAMILIES ("train heldout"), PER_CELL (4), LENGTHS (1,2,4,8), SKIP_TESTS (set: skip the gpu suite, so that
# both families fit one device call), EVAL_TIMEOUT (seconds per family; 280 with the tests, 255 without).
export OUT; B=build/bundle; T0=$(date +%s)
FAMILIES="${FAMILIES:-train heldout}"; PER_CELL="${PER_CELL:-4}"; LENGTHS="${LENGTHS:-1,2,4,8}"
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout 270 $B/longsieve-gpu test /tmp/r > $OUT/test.log 2>&1; echo "tests rc=$? $(( $(date +%s)-T0 ))s"
  sed 's/\x1b\[[0-9;]*m//g' $OUT/test.log | grep -E "✘" | cut -c1-220 | head -30; sed 's/\x1b\[[0-9;]*m//g' $OUT/test.log | grep -E "tests (successful|failed|found)"
  EVAL_TIMEOUT="${EVAL_TIMEOUT:-280}"
else
  EVAL_TIMEOUT="${EVAL_TIMEOUT:-255}"
fi
for fam in $FAMILIES; do
  flag=""; [ "$fam" = heldout ] && flag="--held-out"
  T2=$(date +%s)
  timeout "$EVAL_TIMEOUT" $B/longsieve-gpu eval-engine --model models/longsieve-needle-7m --output /tmp/q/$fam $flag --run-id "eval-$fam" \
    --lengths "$LENGTHS" --per-cell "$PER_CELL" --policies standard --policy "tokenselect:k_frac=0.05,sinks=16,window=64,score=rope" \
    --policy "tokenselect:k_frac=0.1,sinks=16,window=64,score=rope" --policy "tokenselect:k_frac=0.2,sinks=16,window=64,score=rope" \
    --policy "tokenselect:score=rope" --device cuda > $OUT/eval-$fam.log 2>&1
  echo "eval $fam rc=$? in $(( $(date +%s) - T2 )) s"; grep -B2 -A8 "mean @" /tmp/q/$fam/eval/results.md | head -60
  mkdir -p $OUT/$fam && cp /tmp/q/$fam/eval/results.md /tmp/q/$fam/eval/docs.jsonl /tmp/q/$fam/eval/results.jsonl $OUT/$fam/ 2>/dev/null
done
ls -la $OUT
