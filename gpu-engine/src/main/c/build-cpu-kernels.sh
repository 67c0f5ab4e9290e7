#!/usr/bin/env bash
# Compiles cpu_tiles.c (the CPU backend's GEMM block and attention task in C, AVX-512; see its header)
# into liblongsieve_cpu.so on the classpath, io/longsieve/cpu/native/linux-x86_64/, which
# io.longsieve.cpu.kernels.NativeTiles loads at start. Run by Maven in generate-resources
# (gpu-engine/pom.xml), beside build-fatbin.sh.
#
# -march=x86-64-v4 (AVX-512): NativeTiles only calls the library when the JVM's vectors are 512 bits
# wide. -ffp-contract=off: gcc fuses no multiply and add the Java code keeps apart, so the bits stay
# the Java tiles'.
#
# Without gcc (CC=... picks another), or on another OS or machine, the library is skipped with one
# warning and the CPU backend runs its Java tiles (the same results, slower); LONGSIEVE_REQUIRE_CC=1
# (CI, the bundles) fails instead.
#
# Usage: build-cpu-kernels.sh OUTPUT_DIR JAVA_HOME. Skips the compile when the library is newer than
# its source.
set -euo pipefail
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT_DIR="${1:?usage: build-cpu-kernels.sh OUTPUT_DIR JAVA_HOME}/linux-x86_64"
JDK="${2:?usage: build-cpu-kernels.sh OUTPUT_DIR JAVA_HOME}"
OUT="$OUT_DIR/liblongsieve_cpu.so"
CC="${CC:-gcc}"
skip() {
  if [[ "${LONGSIEVE_REQUIRE_CC:-}" == 1 ]]; then
    echo "ERROR: $1, and LONGSIEVE_REQUIRE_CC=1" >&2
    exit 1
  fi
  rm -f "$OUT"
  echo "WARNING: $1: building without the C kernels of the CPU backend (it runs its Java tiles: the same" \
    "results, slower)." >&2
  exit 0
}
[[ "$(uname -s)-$(uname -m)" == Linux-x86_64 ]] || skip "the C kernels are for Linux x86-64"
command -v "$CC" >/dev/null || skip "$CC not found"
[[ -f "$JDK/include/jni.h" ]] || skip "no jni.h under $JDK/include"
if [[ -f "$OUT" && "$OUT" -nt "$SRC/cpu_tiles.c" && "$OUT" -nt "${BASH_SOURCE[0]}" ]]; then
  exit 0
fi
mkdir -p "$OUT_DIR"
"$CC" -O3 -march=x86-64-v4 -ffp-contract=off -fPIC -shared -Wall -Wextra -Werror \
  -I"$JDK/include" -I"$JDK/include/linux" "$SRC/cpu_tiles.c" -o "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
