# Shared by the fatbin builds (gpu-engine's build-fatbin.sh and gpu-bench's build-bench-fatbin.sh,
# which source this file): which nvcc, the stamp that says who built a fatbin, whether it is up to
# date, and the architectures. Sets NVCC, VERSION and GENCODE; defines fatbin_up_to_date.
#
# nvcc: $NVCC, else the one on PATH, else /usr/local/cuda/bin/nvcc; a missing nvcc fails the build.
# LONGSIEVE_DEV_ARCH=90 builds SASS for that one architecture only (a quick compile check while writing
# kernels; never for a bundle): the stamp records it, so the next normal build compiles everything again.
NVCC="${NVCC:-}"
if [[ -z "$NVCC" ]]; then
  if command -v nvcc >/dev/null 2>&1; then NVCC="$(command -v nvcc)";
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then NVCC=/usr/local/cuda/bin/nvcc; fi
fi
if [[ -z "$NVCC" || ! -x "$NVCC" ]]; then
  echo "ERROR: nvcc not found. The CUDA kernels (gpu-engine/src/main/cuda, gpu-bench/src/main/cuda) are compiled" >&2
  echo "       at build time; install the CUDA toolkit (nvcc 12.x or 13.x) and put nvcc on PATH, or set NVCC=/path/to/nvcc." >&2
  exit 2
fi
DEV_ARCH="${LONGSIEVE_DEV_ARCH:-}"
VERSION="$("$NVCC" --version | tail -1)${DEV_ARCH:+ dev-sm_$DEV_ARCH}"
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
