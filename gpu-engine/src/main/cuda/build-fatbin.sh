#!/usr/bin/env bash
# Compiles the kernels of this folder into ONE fatbin, longsieve.fatbin, that the engine loads with
# cuModuleLoadData (driver API; no CUDA toolkit library is needed at run time). Run by Maven in
# generate-resources (gpu-engine/pom.xml); the output lands on the classpath as
# io/longsieve/cuda/longsieve.fatbin.
#
#   SASS (machine code) for sm_80 (A100), sm_86 (A10/RTX 30), sm_89 (L4/L40/RTX 40), sm_90 (H100/H200),
#   plus PTX for compute_80 that newer GPUs JIT-compile at load.
# and the Hopper kernels (hopper/hopper.cu: wgmma, TMA, setmaxnreg) into longsieve_sm90a.cubin, SASS for
# sm_90a alone, which the engine loads as a second module on compute capability 9.0 GPUs.
#
# Drivers: nvcc 13 emits PTX ISA 9.0, which only R580+ drivers can JIT; the SASS parts load on any
# driver that supports the GPU. For a driver older than R580, build with a CUDA 12 nvcc instead:
#   NVCC=/usr/local/cuda-12.6/bin/nvcc mvn -pl gpu-engine package
# (a CUDA 12.x fatbin loads on R525+ drivers for the SASS targets, R560+ to JIT 12.6's PTX).
#
# Usage: build-fatbin.sh OUTPUT_DIR. Skips the compile when the fatbin is newer than every source.
set -euo pipefail
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT_DIR="${1:?usage: build-fatbin.sh OUTPUT_DIR}"
OUT="$OUT_DIR/longsieve.fatbin"
NVCC="${NVCC:-}"
if [[ -z "$NVCC" ]]; then
  if command -v nvcc >/dev/null 2>&1; then NVCC="$(command -v nvcc)";
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then NVCC=/usr/local/cuda/bin/nvcc; fi
fi
if [[ -z "$NVCC" || ! -x "$NVCC" ]]; then
  echo "ERROR: nvcc not found. The CUDA kernels (gpu-engine/src/main/cuda) are compiled at build time;" >&2
  echo "       install the CUDA toolkit (nvcc 12.x or 13.x) and put nvcc on PATH, or set NVCC=/path/to/nvcc." >&2
  exit 2
fi
mkdir -p "$OUT_DIR"
# LONGSIEVE_DEV_ARCH=90 builds SASS for that one architecture only (a quick compile check while writing kernels;
# never for a bundle): the stamp records it, so the next normal build compiles everything again.
DEV_ARCH="${LONGSIEVE_DEV_ARCH:-}"
VERSION="$("$NVCC" --version | tail -1)${DEV_ARCH:+ dev-sm_$DEV_ARCH}"
if [[ -f "$OUT" && "$(cat "$OUT.nvcc" 2>/dev/null)" == "$VERSION" \
      && -z "$(find "$SRC" \( -name '*.cu' -o -name '*.cuh' -o -name '*.sh' \) -newer "$OUT" -print -quit)" ]]; then
  exit 0  # up to date, and built by this nvcc
fi
echo "build-fatbin: $VERSION -> $OUT" >&2
if [[ -n "$DEV_ARCH" ]]; then
  GENCODE=(-gencode "arch=compute_$DEV_ARCH,code=sm_$DEV_ARCH")
else
  GENCODE=(-gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 -gencode arch=compute_89,code=sm_89
           -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80)
fi
"$NVCC" -fatbin -O3 -std=c++17 --threads 0 "${GENCODE[@]}" "$SRC/longsieve.cu" -o "$OUT.tmp"
"$NVCC" -cubin -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a "$SRC/hopper/hopper.cu" -o "$OUT_DIR/longsieve_sm90a.cubin.tmp"
mv "$OUT_DIR/longsieve_sm90a.cubin.tmp" "$OUT_DIR/longsieve_sm90a.cubin"
mv "$OUT.tmp" "$OUT"
echo "$VERSION" >"$OUT.nvcc"
