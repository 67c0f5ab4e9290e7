#!/usr/bin/env bash
# One device run: train, export, check and evaluate longsieve-needle, then pack the results into
# $OUT (model.safetensors, bundle.tgz with the rest of the folder and the card, log.txt). Needs
# gpu-engine/src/main/resources/io/longsieve/eval/suite-text.json and, for the held-out table, the held-out
# family file next to it (suite.held_out_path).
# Run from the folder that holds tools/ and gpu-engine/src/main/resources (the repository root,
# or a copy of these under build/).
#
# One call (about 8 minutes; give the device call 540 s):
#   bash tools/train/run_gpu.sh
# A longer run, up to the 15-minute training envelope, in two back-to-back calls on the same warm machine
# (a call runs at most 10 minutes; the checkpoint waits in /tmp, which a warm machine keeps between calls):
#   TRAIN_SECONDS=840 STOP_AFTER=540 bash tools/train/run_gpu.sh   # call 1: trains 540 s, leaves the checkpoint
#   RESUME=1 bash tools/train/run_gpu.sh                            # call 2: finishes, exports, evaluates, packs
# Further flags for train_needle.py (a model shape, say) go in TRAIN_ARGS, in call 1 only: a resumed run takes
# its settings from the checkpoint.
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/needle-out}"
CKPT=/tmp/needle-ckpt/checkpoint.pt
mkdir -p "$OUT" "$(dirname "$CKPT")"
# the documents and the resume logic first (seconds): a broken generator or loop must not cost the training run
if ! { python3 tools/train/suite.py --self-check && python3 tools/train/test_train_loop.py; } > "$OUT/log.txt" 2>&1; then
  echo "self-checks failed: not training" >> "$OUT/log.txt"; cat "$OUT/log.txt"; exit 1
fi
if [[ -n "${RESUME:-}" ]]; then
  if [[ ! -f "$CKPT" ]]; then
    echo "no checkpoint at $CKPT: the machine was not the first call's (given back in between?)" | tee -a "$OUT/log.txt"
    exit 1
  fi
  timeout 590 python3 tools/train/train_needle.py --out /tmp/needle --resume "$CKPT" \
    --deadline-seconds "${DEADLINE:-540}" >> "$OUT/log.txt" 2>&1
else
  stop=()
  [[ -n "${STOP_AFTER:-}" ]] && stop=(--stop-after-seconds "$STOP_AFTER" --checkpoint "$CKPT")
  timeout 590 python3 tools/train/train_needle.py --out /tmp/needle --train-seconds "${TRAIN_SECONDS:-295}" \
    --deadline-seconds "${DEADLINE:-450}" "${stop[@]}" ${TRAIN_ARGS:-} >> "$OUT/log.txt" 2>&1
fi
rc=$?
echo "rc=$rc" >> "$OUT/log.txt"
if [[ $rc -eq 75 ]]; then
  ls -la "$CKPT" >> "$OUT/log.txt"
  echo "checkpointed: run RESUME=1 bash tools/train/run_gpu.sh in the next call" >> "$OUT/log.txt"
  tail -20 "$OUT/log.txt"
  exit 0
elif [[ $rc -ne 0 ]]; then
  tail -45 "$OUT/log.txt"
  exit "$rc"
fi
D=/tmp/needle/longsieve-needle-7m
python3 tools/train/write_card.py "$D" > /dev/null 2>> "$OUT/log.txt"
cp "$D/model.safetensors" "$OUT/" 2>> "$OUT/log.txt"
tar czf "$OUT/bundle.tgz" -C /tmp/needle --exclude model.safetensors longsieve-needle-7m
ls -la "$OUT"
tail -45 "$OUT/log.txt"
