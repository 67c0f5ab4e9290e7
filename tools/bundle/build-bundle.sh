#!/usr/bin/env bash
# Builds build/bundle/: everything a GPU host WITHOUT Java needs to run the LongSieve engine, its
# benchmark and its GPU test suite, in <= 32 MiB so it travels with the repository (models
# included) in one 64 MiB transfer:
#   jre.tar.xz     a jlink'd JRE (java.base, java.logging, jdk.unsupported, java.management,
#                  java.desktop for Jinjava's java.beans, jdk.incubator.vector), --compress=0 then xz
#   app.tar.xz     the engine jar (with the kernel fatbin), the bench jar (gpu-bench, its own fatbin), their runtime jars slimmed to what the engine
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
source "$ROOT/tools/bundle/bundle-lib.sh"

rm -rf "$WORK" "$OUT"
mkdir -p "$WORK/app/lib" "$WORK/app/test" "$OUT"

echo "bundle: building gpu-engine and gpu-bench (kernels, jars, test classes)" >&2
(cd "$ROOT" && "${MVN[@]}" -pl gpu-engine,gpu-bench -DskipTests package test-compile \
  dependency:build-classpath -DincludeScope=runtime -Dmdep.outputFile="$WORK/cp.txt" >&2)
(cd "$ROOT" && "${MVN[@]}" -pl gpu-engine dependency:copy -Dartifact="$JUNIT_CONSOLE" \
  -DoutputDirectory="$WORK/app/test" >&2)

# the two modules' jars (not gpu-engine's test-jar, whose classes go in as a folder below)
for jar in "$ROOT"/gpu-engine/target/gpu-engine-*.jar "$ROOT"/gpu-bench/target/gpu-bench-*.jar; do
  [[ "$jar" == *-tests.jar ]] || cp "$jar" "$WORK/app/lib/"
done
# test classes as a folder (JUnit scans jars through zipfs, a module the JRE leaves out), without the
# checkpoints: the tests read those from the repository's copy; the bench's tests (io.longsieve.bench)
# beside the engine's
mkdir -p "$WORK/app/test/classes"
(cd "$ROOT/gpu-engine/target/test-classes" && tar --exclude=./models -cf - . | tar -xf - -C "$WORK/app/test/classes")
(cd "$ROOT/gpu-bench/target/test-classes" && tar -cf - . | tar -xf - -C "$WORK/app/test/classes")

tr ':' '\n' <"$WORK/cp.txt" | while read -r jar || [[ -n "$jar" ]]; do
  [[ -z "$jar" || -d "$jar" ]] && continue  # a reactor module's classes folder: its jar is copied above
  slim_engine_natives "$jar" && continue
  case "$(basename "$jar")" in
    junit-*|opentest4j-*|apiguardian-*) ;;  # test-only: the console launcher carries JUnit
    *) cp "$jar" "$WORK/app/lib/" ;;
  esac
done

store_uncompressed "$WORK"/app/lib/*.jar "$WORK"/app/test/*.jar

MODULES=java.base,java.logging,jdk.unsupported,java.management,java.desktop,jdk.incubator.vector
cached_jre "$MODULES" "$OUT/jre.tar.xz"
XZ_OPT="-9 -T2" tar -C "$WORK" -cJf "$OUT/app.tar.xz" app
STAMP="$(cat "$OUT/jre.tar.xz" "$OUT/app.tar.xz" | sha1sum | cut -c1-12)"
echo "$STAMP" >"$OUT/STAMP"
cp "$ROOT/tools/bundle/longsieve-gpu" "$ROOT/tools/bundle/device-run.sh" "$ROOT/tools/bench_torch_peer.py" \
  "$ROOT/tools/bench_fp8_peer.py" "$OUT/"
chmod +x "$OUT/longsieve-gpu" "$OUT/device-run.sh"
rm -rf "$WORK"
SIZE=$(du -cb "$OUT" | tail -1 | cut -f1)
echo "bundle: $OUT $(numfmt --to=iec "$SIZE") (limit 32 MiB)" >&2
if (( SIZE > 32 * 1024 * 1024 )); then echo "bundle: ERROR: over 32 MiB" >&2; exit 1; fi
