#!/usr/bin/env bash
# Builds build/bundle/: everything a GPU host WITHOUT Java needs to run the LongSieve engine, its
# benchmark and its GPU test suite, in <= 32 MiB so it travels with the repository (models
# included) in one 64 MiB transfer:
#   jre.tar.xz     a jlink'd JRE (java.base, java.logging, jdk.unsupported, java.management,
#                  java.desktop for Jinjava's java.beans, jdk.incubator.vector), --compress=0 then xz
#   app.tar.xz     the engine jar (with the kernel fatbin), its runtime jars slimmed to what the engine
#                  loads on linux-x86_64 (JCuda: libJCudaDriver only; DJL tokenizers and JNA: no other
#                  platforms' natives), the test classes and junit-platform-console-standalone
#   longsieve-gpu  the launcher: unpacks both into /tmp once, then runs generate | bench | test
# Usage (from the repository root): tools/bundle/build-bundle.sh [OUT_DIR]   (default build/bundle)
# Needs: JDK 17 with jmods (jlink), Maven, nvcc (the Maven build compiles the kernels), xz, zip/unzip.
# Maven runs offline (-o) unless OFFLINE=0 (the first build on a machine needs OFFLINE=0 to fetch
# junit-platform-console-standalone). The jlink'd JRE is cached in build/bundle-cache/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-$ROOT/build/bundle}"
WORK="$ROOT/build/bundle-work"
JUNIT_CONSOLE="org.junit.platform:junit-platform-console-standalone:1.14.4"
JAVA_HOME="${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")}"
MVN=(mvn -B -q)
[[ "${OFFLINE:-1}" == 1 ]] && MVN+=(-o)

rm -rf "$WORK" "$OUT"
mkdir -p "$WORK/app/lib" "$WORK/app/test" "$OUT"

echo "bundle: building gpu-engine (kernels, jar, test classes)" >&2
(cd "$ROOT" && "${MVN[@]}" -pl gpu-engine -DskipTests package test-compile \
  dependency:build-classpath -DincludeScope=runtime -Dmdep.outputFile="$WORK/cp.txt" >&2)
(cd "$ROOT" && "${MVN[@]}" -pl gpu-engine dependency:copy -Dartifact="$JUNIT_CONSOLE" \
  -DoutputDirectory="$WORK/app/test" >&2)

cp "$ROOT"/gpu-engine/target/gpu-engine-*.jar "$WORK/app/lib/"
# test classes as a folder (JUnit scans jars through zipfs, a module the JRE leaves out), without the
# checkpoints: the tests read those from the repository's copy
mkdir -p "$WORK/app/test/classes"
(cd "$ROOT/gpu-engine/target/test-classes" && tar --exclude=./models -cf - . | tar -xf - -C "$WORK/app/test/classes")

slim() {  # slim JAR PATTERN...: delete matching entries from a copy of JAR in app/lib
  local jar="$1"; shift
  local dst="$WORK/app/lib/$(basename "$jar")"
  cp "$jar" "$dst"
  zip -q -d "$dst" "$@" >/dev/null 2>&1 || true
}
tr ':' '\n' <"$WORK/cp.txt" | while read -r jar || [[ -n "$jar" ]]; do
  [[ -z "$jar" ]] && continue
  case "$(basename "$jar")" in
    jcuda-natives-*) slim "$jar" 'lib/libJNvPTXCompiler*' 'lib/libJNvrtc*' 'lib/libJCudaRuntime*' ;;
    tokenizers-*) slim "$jar" 'native/lib/linux-aarch64/*' 'native/lib/osx-*' 'native/lib/win-*' ;;
    jna-[0-9]*) slim "$jar" 'com/sun/jna/aix*' 'com/sun/jna/darwin*' 'com/sun/jna/freebsd*' 'com/sun/jna/openbsd*' \
        'com/sun/jna/sunos*' 'com/sun/jna/win32*' 'com/sun/jna/linux-a*' 'com/sun/jna/linux-l*' 'com/sun/jna/linux-m*' \
        'com/sun/jna/linux-p*' 'com/sun/jna/linux-r*' 'com/sun/jna/linux-s*' 'com/sun/jna/linux-x86/*' 'com/sun/jna/dragonfly*' ;;
    junit-*|opentest4j-*|apiguardian-*) ;;  # test-only: the console launcher carries JUnit
    *) cp "$jar" "$WORK/app/lib/" ;;
  esac
done

# Jars are deflated, which xz cannot squeeze further: re-store them uncompressed (zip -0) so the
# solid xz archive below compresses their contents (≈22 MB of jars become ≈11 MB of app.tar.xz).
for jar in "$WORK"/app/lib/*.jar "$WORK"/app/test/*.jar; do
  tmp="$(mktemp -d "$WORK/x.XXXX")"
  (cd "$tmp" && unzip -q "$jar" && rm -f "$jar" && zip -q -0 -r -X "$jar" .)
  rm -rf "$tmp"
done

MODULES=java.base,java.logging,jdk.unsupported,java.management,java.desktop,jdk.incubator.vector
JRE_KEY="$("$JAVA_HOME/bin/java" -version 2>&1 | head -1 | tr -c 'A-Za-z0-9.' _)-$(echo "$MODULES" | sha1sum | cut -c1-8)"
JRE_CACHE="$ROOT/build/bundle-cache/jre-$JRE_KEY.tar.xz"   # xz -9 of the JRE takes minutes: reuse it
if [[ ! -f "$JRE_CACHE" ]]; then
  echo "bundle: jlink" >&2
  "$JAVA_HOME/bin/jlink" --add-modules "$MODULES" \
    --compress=0 --strip-debug --no-header-files --no-man-pages --output "$WORK/jre"
  mkdir -p "$(dirname "$JRE_CACHE")"
  XZ_OPT="-9 -T2" tar -C "$WORK" -cJf "$JRE_CACHE.tmp" jre && mv "$JRE_CACHE.tmp" "$JRE_CACHE"
fi
cp "$JRE_CACHE" "$OUT/jre.tar.xz"
XZ_OPT="-9 -T2" tar -C "$WORK" -cJf "$OUT/app.tar.xz" app
STAMP="$(cat "$OUT/jre.tar.xz" "$OUT/app.tar.xz" | sha1sum | cut -c1-12)"
echo "$STAMP" >"$OUT/STAMP"
cp "$ROOT/tools/bundle/longsieve-gpu" "$ROOT/tools/bundle/device-run.sh" "$ROOT/tools/bench_torch_peer.py" "$OUT/"
chmod +x "$OUT/longsieve-gpu" "$OUT/device-run.sh"
rm -rf "$WORK"
SIZE=$(du -cb "$OUT" | tail -1 | cut -f1)
echo "bundle: $OUT $(numfmt --to=iec "$SIZE") (limit 32 MiB)" >&2
if (( SIZE > 32 * 1024 * 1024 )); then echo "bundle: ERROR: over 32 MiB" >&2; exit 1; fi
