#!/usr/bin/env bash
# Compiles the bench-only kernels of this folder (bench.cu includes them) into their own fatbin,
# longsieve_bench.fatbin, for the same architectures and with the same nvcc as the engine's
# (gpu-engine/src/main/cuda/build-fatbin.sh and nvcc-lib.sh; the driver notes there apply here too).
# The engine's fatbin carries none of these kernels; ListFloor loads this one as a module of its own.
# Shared device code comes from the engine's headers (gpu-engine/src/main/cuda/common, -I).
# Without nvcc it skips quietly: the engine's build-fatbin.sh has already warned once for the build.
# Usage: build-bench-fatbin.sh OUTPUT_DIR. Skips the compile when the fatbin is newer than every source.
set -euo pipefail
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ENGINE_SRC="$(cd "$SRC/../../../../gpu-engine/src/main/cuda" && pwd)"
OUT_DIR="${1:?usage: build-bench-fatbin.sh OUTPUT_DIR}"
OUT="$OUT_DIR/longsieve_bench.fatbin"
source "$ENGINE_SRC/nvcc-lib.sh"  # NVCC, VERSION, GENCODE, fatbin_up_to_date
mkdir -p "$OUT_DIR"
if [[ -z "$NVCC" ]]; then
  rm -f "$OUT" "$OUT.nvcc"
  exit 0
fi
if fatbin_up_to_date "$OUT" "$SRC" "$ENGINE_SRC/common" "$ENGINE_SRC/nvcc-lib.sh"; then
  exit 0  # up to date, and built by this nvcc
fi
echo "build-bench-fatbin: $VERSION -> $OUT" >&2
"$NVCC" -fatbin -O3 -std=c++17 --threads 0 -I "$ENGINE_SRC" "${GENCODE[@]}" "$SRC/bench.cu" -o "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "$VERSION" >"$OUT.nvcc"
