#!/usr/bin/env bash
# One device run: train, export, check and evaluate longsieve-needle, then pack the results into
# $OUT (model.safetensors, bundle.tgz with the rest of the folder and the card, log.txt). Needs
# gpu-engine/src/main/resources/io/longsieve/eval/suite-text.json and, for the held-out table, the held-out
# family file next to it (suite.held_out_path).
# Run from the folder that holds tools/ and gpu-engine/src/main/resources (the repository root,
# or a copy of these under build/). Wall time about 8 minutes; give the device call 540 s.
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/needle-out}"
mkdir -p "$OUT"
# the documents first (2 s, no torch): a broken generator must not cost the training run
if ! python3 tools/train/suite.py --self-check > "$OUT/log.txt" 2>&1; then
  echo "suite self-check failed: not training" >> "$OUT/log.txt"; cat "$OUT/log.txt"; exit 1
fi
timeout 500 python3 tools/train/train_needle.py --out /tmp/needle --train-seconds 295 --deadline-seconds 450 \
  >> "$OUT/log.txt" 2>&1
echo "rc=$?" >> "$OUT/log.txt"
D=/tmp/needle/longsieve-needle-7m
python3 tools/train/write_card.py "$D" > /dev/null 2>> "$OUT/log.txt"
cp "$D/model.safetensors" "$OUT/" 2>> "$OUT/log.txt"
tar czf "$OUT/bundle.tgz" -C /tmp/needle --exclude model.safetensors longsieve-needle-7m
ls -la "$OUT"
tail -45 "$OUT/log.txt"
