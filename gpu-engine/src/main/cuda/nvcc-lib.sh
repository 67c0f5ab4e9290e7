# Shared by the fatbin builds (gpu-engine's build-fatbin.sh and gpu-bench's build-bench-fatbin.sh,
# which source this file): which nvcc, the stamp that says who built a fatbin, whether it is up to
# date, and the architectures. Sets NVCC, VERSION and GENCODE; defines fatbin_up_to_date and
# cuda_build_properties.
#
# nvcc: $NVCC, else the one on PATH, else $CUDA_HOME/bin/nvcc (default /usr/local/cuda). Without one the
# kernels are not built and NVCC stays empty: the callers skip their compile, so a machine without the
# CUDA toolkit still builds the CPU engine (the CUDA backend then says the build has no kernels).
# LONGSIEVE_REQUIRE_NVCC=1 (CI, .ci/run) makes a missing nvcc fail the build instead, so CI cannot
# quietly ship a jar without kernels.
# LONGSIEVE_DEV_ARCH=90 builds SASS for that one architecture only (a quick compile check while writing
# kernels; never for a bundle): the stamp records it, so the next normal build compiles everything again.
NVCC="${NVCC:-}"
if [[ -z "$NVCC" ]]; then
  if command -v nvcc >/dev/null 2>&1; then NVCC="$(command -v nvcc)";
  elif [[ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]]; then NVCC="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"; fi
fi
if [[ -z "$NVCC" || ! -x "$NVCC" ]]; then
  if [[ "${LONGSIEVE_REQUIRE_NVCC:-0}" == 1 ]]; then
    echo "ERROR: nvcc not found and LONGSIEVE_REQUIRE_NVCC=1. The CUDA kernels (gpu-engine/src/main/cuda," >&2
    echo "       gpu-bench/src/main/cuda) need the CUDA toolkit (nvcc 12.x or 13.x) on PATH, or NVCC=/path/to/nvcc." >&2
    exit 2
  fi
  NVCC=""
fi
DEV_ARCH="${LONGSIEVE_DEV_ARCH:-}"
VERSION=""
if [[ -n "$NVCC" ]]; then VERSION="$("$NVCC" --version | tail -1)${DEV_ARCH:+ dev-sm_$DEV_ARCH}"; fi
if [[ -n "$DEV_ARCH" ]]; then
  GENCODE=(-gencode "arch=compute_$DEV_ARCH,code=sm_$DEV_ARCH")
else
  GENCODE=(-gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 -gencode arch=compute_89,code=sm_89
           -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80)
fi

# fatbin_up_to_date OUT DIR...: true when OUT was built by this nvcc (OUT.nvcc) and is newer than every
# .cu, .cuh and .sh below the DIRs.
fatbin_up_to_date() {
  local out="$1"
  shift
  [[ -f "$out" && "$(cat "$out.nvcc" 2>/dev/null)" == "$VERSION" \
     && -z "$(find "$@" \( -name '*.cu' -o -name '*.cuh' -o -name '*.sh' \) -newer "$out" -print -quit)" ]]
}

# cuda_build_properties FILE: what the kernels were built with, for the jar's manifest and the engine's
# messages: cuda.build (the nvcc release, or "none") and cuda.min_driver, the oldest NVIDIA driver that
# loads them (CUDA 13: R580; CUDA 12: R525 for the SASS, see build-fatbin.sh for PTX JIT).
cuda_build_properties() {
  local file="$1" build=none driver=none major
  if [[ -n "$NVCC" ]]; then
    build="$(echo "$VERSION" | sed -n 's/.*cuda_\([0-9.]*\)\.r.*/\1/p')"
    major="${build%%.*}"
    if [[ "$major" -ge 13 ]]; then driver=R580; else driver=R525; fi
    build="CUDA $build${DEV_ARCH:+ dev-sm_$DEV_ARCH}"
  fi
  printf 'cuda.build=%s\ncuda.min_driver=%s\n' "$build" "$driver" >"$file.tmp"
  # replaced only when it changes, so an up-to-date build leaves the classes folder untouched
  if cmp -s "$file.tmp" "$file"; then rm "$file.tmp"; else mv "$file.tmp" "$file"; fi
}
