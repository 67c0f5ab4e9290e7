#!/usr/bin/env bash
# Compiles the kernels of this folder (one sub-folder per family, longsieve.cu includes them all)
# into ONE fatbin, longsieve.fatbin, that the engine loads with
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
# Before the fatbin, every kernel file is compiled alone to PTX for one architecture, so a file that
# only builds after another one in the unity file (a missing #include) fails here, naming the file.
#
# Without nvcc (and LONGSIEVE_REQUIRE_NVCC unset) the kernels are skipped with one warning and no fatbin
# is left in OUTPUT_DIR: the engine builds and runs on the CPU, and --device cuda says the build has no
# kernels. cuda-build.properties in OUTPUT_DIR records which CUDA built them (or none) and the minimum
# driver, for the assembly jar's manifest.
#
# Usage: build-fatbin.sh OUTPUT_DIR. Skips the compile when the fatbin is newer than every source.
set -euo pipefail
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT_DIR="${1:?usage: build-fatbin.sh OUTPUT_DIR}"
OUT="$OUT_DIR/longsieve.fatbin"
source "$SRC/nvcc-lib.sh"  # NVCC, VERSION, GENCODE, fatbin_up_to_date
mkdir -p "$OUT_DIR"
cuda_build_properties "$OUT_DIR/cuda-build.properties"
if [[ -z "$NVCC" ]]; then
  # a fatbin left from an earlier build with nvcc would contradict cuda-build.properties
  rm -f "$OUT" "$OUT.nvcc" "$OUT_DIR/longsieve_sm90a.cubin"
  echo "WARNING: nvcc not found: building without the CUDA kernels (the CPU backend only; --device cuda will" \
    "say this build has no kernels). Put nvcc 12.x/13.x on PATH or set NVCC=/path/to/nvcc to build them." >&2
  exit 0
fi
if fatbin_up_to_date "$OUT" "$SRC"; then
  exit 0  # up to date, and built by this nvcc
fi
echo "build-fatbin: $VERSION -> $OUT" >&2
# each family file on its own includes (hopper/ is one module built below; longsieve.cu is the whole)
echo "build-fatbin: compiling each kernel file alone" >&2
find "$SRC" -path "$SRC/hopper" -prune -o -name '*.cu' ! -name longsieve.cu -print0 \
  | xargs -0 -P 2 -I{} "$NVCC" -std=c++17 -arch=sm_90 --ptx -o /dev/null {} \
  || { echo "ERROR: a kernel file does not compile on its own includes (see above)" >&2; exit 1; }
"$NVCC" -fatbin -O3 -std=c++17 --threads 0 "${GENCODE[@]}" "$SRC/longsieve.cu" -o "$OUT.tmp"
"$NVCC" -cubin -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a "$SRC/hopper/hopper.cu" -o "$OUT_DIR/longsieve_sm90a.cubin.tmp"
mv "$OUT_DIR/longsieve_sm90a.cubin.tmp" "$OUT_DIR/longsieve_sm90a.cubin"
mv "$OUT.tmp" "$OUT"
echo "$VERSION" >"$OUT.nvcc"
