# Shared by build-bundle.sh (the engine bundle) and build-cluster-bundle.sh (the Spark job's): sourced
# after ROOT and WORK are set. Sets JAVA_HOME and MVN (offline unless OFFLINE=0).
JAVA_HOME="${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")}"
MVN=(mvn -B -q)
# a bundle is for a GPU host: a build that skipped the kernels for want of nvcc must fail here
export LONGSIEVE_REQUIRE_NVCC=1
export LONGSIEVE_REQUIRE_CC=1 # and the CPU backend's C kernels with gcc (src/main/c/build-cpu-kernels.sh)
[[ "${OFFLINE:-1}" == 1 ]] && MVN+=(-o)

slim() {  # slim JAR PATTERN...: a copy of JAR in $WORK/app/lib without the matching entries
  local jar="$1"; shift
  local dst="$WORK/app/lib/$(basename "$jar")"
  cp "$jar" "$dst"
  zip -q -d "$dst" "$@" >/dev/null 2>&1 || true
}

# The engine's own native jars, slimmed to linux-x86_64 and what the engine loads (JCuda: the driver
# API only). Returns 1 for any other jar.
slim_engine_natives() {
  case "$(basename "$1")" in
    jcuda-natives-*) slim "$1" 'lib/libJNvPTXCompiler*' 'lib/libJNvrtc*' 'lib/libJCudaRuntime*' ;;
    tokenizers-*) slim "$1" 'native/lib/linux-aarch64/*' 'native/lib/osx-*' 'native/lib/win-*' ;;
    jna-[0-9]*) slim "$1" 'com/sun/jna/aix*' 'com/sun/jna/darwin*' 'com/sun/jna/freebsd*' 'com/sun/jna/openbsd*' \
        'com/sun/jna/sunos*' 'com/sun/jna/win32*' 'com/sun/jna/linux-a*' 'com/sun/jna/linux-l*' 'com/sun/jna/linux-m*' \
        'com/sun/jna/linux-p*' 'com/sun/jna/linux-r*' 'com/sun/jna/linux-s*' 'com/sun/jna/linux-x86/*' 'com/sun/jna/dragonfly*' ;;
    *) return 1 ;;
  esac
}

# Jars are deflated, which xz cannot squeeze further: re-store them uncompressed (zip -0) so the solid
# xz archive compresses their contents.
store_uncompressed() {  # store_uncompressed JAR...
  local jar tmp
  for jar in "$@"; do
    tmp="$(mktemp -d "$WORK/x.XXXX")"
    (cd "$tmp" && unzip -q -o "$jar" && rm -f "$jar" && zip -q -0 -r -X "$jar" .)
    rm -rf "$tmp"
  done
}

# jlink's JRE of the given modules as tar.xz at DEST; xz -9 of a JRE takes minutes, so it is cached in
# build/bundle-cache by JDK version and module list.
cached_jre() {  # cached_jre MODULES DEST
  local modules="$1" dest="$2" key cache
  key="$("$JAVA_HOME/bin/java" -version 2>&1 | head -1 | tr -c 'A-Za-z0-9.' _)-$(echo "$modules" | sha1sum | cut -c1-8)"
  cache="$ROOT/build/bundle-cache/jre-$key.tar.xz"
  if [[ ! -f "$cache" ]]; then
    echo "bundle: jlink" >&2
    "$JAVA_HOME/bin/jlink" --add-modules "$modules" \
      --compress=0 --strip-debug --no-header-files --no-man-pages --output "$WORK/jre"
    mkdir -p "$(dirname "$cache")"
    XZ_OPT="-9 -T2" tar -C "$WORK" -cJf "$cache.tmp" jre && mv "$cache.tmp" "$cache"
  fi
  cp "$cache" "$dest"
}
