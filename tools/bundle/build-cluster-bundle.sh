#!/usr/bin/env bash
# Builds build/cluster-bundle/: the Spark job (JobCli: run | report | eval, and the engine commands)
# for a linux-x86_64 GPU host WITHOUT Java, in parts that each travel with the repository in one
# 64 MiB transfer:
#   jre.tar.xz          a jlink'd JRE (java.se and the JDK modules Spark and the engine load), xz
#   app.tar.xz.NN       the job's runtime class path, slimmed (below), jars re-stored uncompressed and
#                       packed as one solid xz, split into parts of PART_MB (default 40) MiB
#   longsieve-cluster   the launcher: reassembles and unpacks the parts into /tmp once, then runs the
#                       job's CLI (Spark local or local-cluster mode) with the flags bin/longsieve uses
# Slimming, each removal proven by running the job from the bundle on the CPU (tools/bundle/check-
# cluster-bundle.sh, in local and local-cluster mode):
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
JAVA_HOME="${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")}"
MVN=(mvn -B -q)
[[ "${OFFLINE:-1}" == 1 ]] && MVN+=(-o)

rm -rf "$WORK" "$OUT"
mkdir -p "$WORK/app/lib" "$OUT"

echo "cluster-bundle: building the job (kernels, jars, runtime class path)" >&2
(cd "$ROOT" && "${MVN[@]}" -pl spark-job -am -DskipTests package dependency:build-classpath \
  -DincludeScope=runtime -Dmdep.outputFile="$WORK/cp.txt" >&2)
cp "$ROOT"/spark-job/target/spark-job-*.jar "$WORK/app/lib/"

slim() {  # slim JAR PATTERN...: a copy of JAR in app/lib without the matching entries
  local jar="$1"; shift
  local dst="$WORK/app/lib/$(basename "$jar")"
  cp "$jar" "$dst"
  zip -q -d "$dst" "$@" >/dev/null 2>&1 || true
}
dropped=()
tr ':' '\n' <"$WORK/cp.txt" | while read -r jar || [[ -n "$jar" ]]; do
  [[ -z "$jar" ]] && continue
  name="$(basename "$jar")"
  case "$name" in
    rocksdbjni-*|netty-codec-native-quic-*) echo "cluster-bundle: drop $name" >&2 ;;
    netty-*-osx-*|netty-*-windows-*|netty-*-aarch_64*|netty-*-riscv64*|netty-*-linux-aarch*) echo "cluster-bundle: drop $name" >&2 ;;
    jcuda-natives-*) slim "$jar" 'lib/libJNvPTXCompiler*' 'lib/libJNvrtc*' 'lib/libJCudaRuntime*' ;;
    tokenizers-*) slim "$jar" 'native/lib/linux-aarch64/*' 'native/lib/osx-*' 'native/lib/win-*' ;;
    jna-[0-9]*) slim "$jar" 'com/sun/jna/aix*' 'com/sun/jna/darwin*' 'com/sun/jna/freebsd*' 'com/sun/jna/openbsd*' \
        'com/sun/jna/sunos*' 'com/sun/jna/win32*' 'com/sun/jna/linux-a*' 'com/sun/jna/linux-l*' 'com/sun/jna/linux-m*' \
        'com/sun/jna/linux-p*' 'com/sun/jna/linux-r*' 'com/sun/jna/linux-s*' 'com/sun/jna/linux-x86/*' 'com/sun/jna/dragonfly*' ;;
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

# deflated jars do not shrink under xz: re-store them uncompressed so the solid archive compresses their contents
for jar in "$WORK"/app/lib/*.jar; do
  tmp="$(mktemp -d "$WORK/x.XXXX")"
  (cd "$tmp" && unzip -q -o "$jar" && rm -f "$jar" && zip -q -0 -r -X "$jar" .)
  rm -rf "$tmp"
done
# the job's default model and examples travel with the repository, not here
cp "$ROOT/conf/log4j2.properties" "$WORK/app/" 2>/dev/null || true

MODULES=java.se,jdk.unsupported,jdk.incubator.vector,jdk.management,jdk.zipfs,jdk.crypto.ec,jdk.security.auth,jdk.naming.dns
JRE_KEY="$("$JAVA_HOME/bin/java" -version 2>&1 | head -1 | tr -c 'A-Za-z0-9.' _)-$(echo "$MODULES" | sha1sum | cut -c1-8)"
JRE_CACHE="$ROOT/build/bundle-cache/jre-$JRE_KEY.tar.xz"
if [[ ! -f "$JRE_CACHE" ]]; then
  echo "cluster-bundle: jlink" >&2
  "$JAVA_HOME/bin/jlink" --add-modules "$MODULES" \
    --compress=0 --strip-debug --no-header-files --no-man-pages --output "$WORK/jre"
  mkdir -p "$(dirname "$JRE_CACHE")"
  XZ_OPT="-9 -T2" tar -C "$WORK" -cJf "$JRE_CACHE.tmp" jre && mv "$JRE_CACHE.tmp" "$JRE_CACHE"
fi
cp "$JRE_CACHE" "$OUT/jre.tar.xz"
echo "cluster-bundle: packing $(du -sh "$WORK/app" | cut -f1) of jars" >&2
XZ_OPT="-9 -T2" tar -C "$WORK" -cJf "$WORK/app.tar.xz" app
split -b "${PART_MB}M" -d -a 2 "$WORK/app.tar.xz" "$OUT/app.tar.xz."
STAMP="$(cat "$OUT/jre.tar.xz" "$OUT"/app.tar.xz.* | sha1sum | cut -c1-12)"
echo "$STAMP" >"$OUT/STAMP"
(cd "$OUT" && sha1sum jre.tar.xz app.tar.xz.* >SHA1SUMS)
cp "$ROOT/tools/bundle/longsieve-cluster" "$OUT/"
chmod +x "$OUT/longsieve-cluster"
rm -rf "$WORK"
echo "cluster-bundle: $OUT $(du -sh "$OUT" | cut -f1) in all:" >&2
ls -l "$OUT" | awk 'NR > 1 {printf "  %-22s %6.1f MiB\n", $9, $5 / 1048576}' >&2
