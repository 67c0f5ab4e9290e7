#!/usr/bin/env bash
# Builds build/cluster-bundle/: the Spark job (JobCli: run | report | eval, and the engine commands)
# for a linux-x86_64 GPU host WITHOUT Java, in parts that each travel with the repository in one
# 64 MiB transfer:
#   jre.tar.xz          a jlink'd JRE (java.se and the JDK modules Spark and the engine load), xz
#   app.tar.xz.NN       the job's runtime class path, slimmed (below), jars re-stored uncompressed and
#                       packed as one solid xz, split into parts of PART_MB (default 40) MiB
#   longsieve-cluster   the launcher: reassembles and unpacks the parts into /tmp once, then runs the
#                       job's CLI (Spark local or local-cluster mode) with the flags bin/longsieve uses
# Slimming, the removals proven by running the job from the bundle on the CPU (2026-12-02: the
# README's sample, 20 of 20 rows ok, in local and in local-cluster[1,2,2048] mode):
#   rocksdbjni          dropped: Spark's UI/history key-value store on disk; a batch job's live UI keeps
#                       its store in memory (spark.ui.store.path unset)
#   netty native QUIC / other platforms' netty natives   dropped: Spark's RPC runs on NIO or epoll
#   zstd-jni, snappy-java, lz4-java, DJL tokenizers, JCuda, JNA   other platforms' natives deleted
# Usage (repository root): tools/bundle/build-cluster-bundle.sh [OUT_DIR]
# Needs: JDK 17 with jmods, Maven (offline unless OFFLINE=0), nvcc (the build compiles the kernels), xz, zip.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-$ROOT/build/cluster-bundle}"
WORK="$ROOT/build/cluster-bundle-work"
PART_MB="${PART_MB:-40}"
source "$ROOT/tools/bundle/bundle-lib.sh"

rm -rf "$WORK" "$OUT"
mkdir -p "$WORK/app/lib" "$OUT"

echo "cluster-bundle: building the job (kernels, jars, runtime class path)" >&2
(cd "$ROOT" && "${MVN[@]}" -pl spark-job -am -DskipTests package dependency:build-classpath \
  -DincludeScope=runtime -Dmdep.outputFile="$WORK/cp.txt" >&2)
cp "$ROOT"/spark-job/target/spark-job-*.jar "$WORK/app/lib/"

tr ':' '\n' <"$WORK/cp.txt" | while read -r jar || [[ -n "$jar" ]]; do
  [[ -z "$jar" ]] && continue
  slim_engine_natives "$jar" && continue
  name="$(basename "$jar")"
  case "$name" in
    rocksdbjni-*|netty-codec-native-quic-*) echo "cluster-bundle: drop $name" >&2 ;;
    netty-*-osx-*|netty-*-windows-*|netty-*-aarch_64*|netty-*-riscv64*|netty-*-linux-aarch*) echo "cluster-bundle: drop $name" >&2 ;;
    zstd-jni-*) slim "$jar" 'darwin/*' 'win/*' 'freebsd/*' 'aix/*' 'linux/aarch64/*' 'linux/arm/*' 'linux/i386/*' \
        'linux/ppc64/*' 'linux/ppc64le/*' 'linux/s390x/*' 'linux/mips64/*' 'linux/loongarch64/*' 'linux/riscv64/*' ;;
    snappy-java-*) slim "$jar" 'org/xerial/snappy/native/Mac/*' 'org/xerial/snappy/native/Windows/*' \
        'org/xerial/snappy/native/AIX/*' 'org/xerial/snappy/native/SunOS/*' 'org/xerial/snappy/native/FreeBSD/*' \
        'org/xerial/snappy/native/Linux/aarch64/*' 'org/xerial/snappy/native/Linux/arm*' \
        'org/xerial/snappy/native/Linux/ppc*' 'org/xerial/snappy/native/Linux/s390x/*' \
        'org/xerial/snappy/native/Linux/x86/*' 'org/xerial/snappy/native/Linux/riscv64/*' \
        'org/xerial/snappy/native/Linux/loongarch64/*' 'org/xerial/snappy/native/Linux/android-arm/*' ;;
    lz4-java-*) slim "$jar" 'net/jpountz/util/darwin/*' 'net/jpountz/util/win32/*' 'net/jpountz/util/linux/aarch64/*' \
        'net/jpountz/util/linux/ppc64le/*' 'net/jpountz/util/linux/s390x/*' 'net/jpountz/util/linux/i386/*' ;;
    *) cp "$jar" "$WORK/app/lib/" ;;
  esac
done

store_uncompressed "$WORK"/app/lib/*.jar

MODULES=java.se,jdk.unsupported,jdk.incubator.vector,jdk.management,jdk.zipfs,jdk.crypto.ec,jdk.security.auth,jdk.naming.dns
cached_jre "$MODULES" "$OUT/jre.tar.xz"
echo "cluster-bundle: packing $(du -sh "$WORK/app" | cut -f1) of jars" >&2
XZ_OPT="-9 -T2" tar -C "$WORK" -cJf "$WORK/app.tar.xz" app
split -b "${PART_MB}M" -d -a 2 "$WORK/app.tar.xz" "$OUT/app.tar.xz."
STAMP="$(cat "$OUT/jre.tar.xz" "$OUT"/app.tar.xz.* | sha1sum | cut -c1-12)"
echo "$STAMP" >"$OUT/STAMP"
(cd "$OUT" && sha1sum jre.tar.xz app.tar.xz.* >SHA1SUMS)
cp "$ROOT/tools/bundle/longsieve-cluster" "$ROOT/bin/spark-jvm-flags" "$OUT/"
chmod +x "$OUT/longsieve-cluster"
rm -rf "$WORK"
echo "cluster-bundle: $OUT $(du -sh "$OUT" | cut -f1) in all:" >&2
ls -l "$OUT" | awk 'NR > 1 {printf "  %-22s %6.1f MiB\n", $9, $5 / 1048576}' >&2
