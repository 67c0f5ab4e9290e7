#!/usr/bin/env bash
# check-assembly-jar.sh JAR: fails, naming what is wrong, unless the Spark job's assembly jar is what a
# linux-x86_64 GPU cluster needs and nothing more: native libraries for linux-x86_64 only, no NVPTX
# compiler or NVRTC (the engine loads its fatbin through the driver API), no unrelocated guava (Spark's
# own is on the class path), and a manifest that says which CUDA built the kernels and the oldest
# driver that loads them. Run by the assembly profile after the shade (spark-job/pom.xml).
set -euo pipefail
JAR="${1:?usage: check-assembly-jar.sh JAR}"
fail() { echo "check-assembly-jar: $JAR: $*" >&2; exit 1; }
[[ -f "$JAR" ]] || fail "no such file"
# the JDK's jar tool, not unzip: a build machine has a JDK, not necessarily unzip
JAR_TOOL="${JAVA_HOME:+$JAVA_HOME/bin/}jar"
command -v "$JAR_TOOL" >/dev/null 2>&1 || JAR_TOOL=jar
JAR="$(cd "$(dirname "$JAR")" && pwd)/$(basename "$JAR")"
entries="$("$JAR_TOOL" tf "$JAR")"

other_natives="$(grep -E '\.(so|dll|dylib|jnilib|a)$' <<<"$entries" | grep -Ev 'linux-x86[-_]64' || true)"
[[ -z "$other_natives" ]] || fail "native libraries for other platforms: $(head -3 <<<"$other_natives" | tr '\n' ' ')"
compilers="$(grep -Ei 'nvptx|nvrtc' <<<"$entries" || true)"
[[ -z "$compilers" ]] || fail "CUDA compiler pieces: $(head -3 <<<"$compilers" | tr '\n' ' ')"
guava="$(grep -E '^com/google/(common|thirdparty)/' <<<"$entries" || true)"
[[ -z "$guava" ]] || fail "unrelocated guava: $(head -1 <<<"$guava")"
grep -q '^io/longsieve/shaded/com/google/common/' <<<"$entries" || fail "no relocated guava (jinjava needs it)"
grep -q '^lib/libJCudaDriver-.*-linux-x86_64\.so$' <<<"$entries" || fail "no JCuda driver binding for linux-x86_64"
if [[ "${LONGSIEVE_REQUIRE_CC:-}" == 1 ]]; then # CI and the bundles: the CPU backend's C kernels must be in
  grep -q '^io/longsieve/cpu/native/linux-x86_64/liblongsieve_cpu\.so$' <<<"$entries" \
    || fail "no C kernels for the CPU backend (io/longsieve/cpu/native/linux-x86_64/liblongsieve_cpu.so)"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && "$JAR_TOOL" xf "$JAR" META-INF/MANIFEST.MF)
manifest="$(tr -d '\r' <"$tmp/META-INF/MANIFEST.MF")"
build="$(sed -n 's/^LongSieve-CUDA-Build: //p' <<<"$manifest")"
driver="$(sed -n 's/^LongSieve-Min-Driver: //p' <<<"$manifest")"
[[ "$build" == "none" || "$build" =~ ^CUDA\ [0-9]+\.[0-9]+ ]] || fail "manifest LongSieve-CUDA-Build is '$build'"
[[ "$driver" == "none" || "$driver" =~ ^R[0-9]+$ ]] || fail "manifest LongSieve-Min-Driver is '$driver'"
# the kernels and the manifest must agree: a "none" jar without a fatbin, a CUDA jar with one
if grep -q '^io/longsieve/cuda/longsieve\.fatbin$' <<<"$entries"; then
  [[ "$build" != none ]] || fail "carries a fatbin but its manifest says LongSieve-CUDA-Build: none"
else
  [[ "$build" == none ]] || fail "has no fatbin but its manifest says LongSieve-CUDA-Build: $build"
fi
echo "check-assembly-jar: $(basename "$JAR"): $(( $(stat -c %s "$JAR") / 1048576 )) MiB, $build, min driver $driver" >&2
