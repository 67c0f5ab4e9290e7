#!/usr/bin/env bash
# Installs a stub of com.nvidia:rapids-4-spark-parent_2.13:26.08.1 into the local Maven repository.
#
# Why: the RAPIDS Accelerator jar (com.nvidia:rapids-4-spark_2.13:26.08.1) is on Maven Central, but
# its POM names a parent POM that Central does not serve (404), so Maven cannot read the jar's
# descriptor and fails with "Could not find artifact com.nvidia:rapids-4-spark-parent_2.13:pom".
# The parent only carries build settings of NVIDIA's own build; the jar has no dependencies that
# matter here (cuDF and the CUDA runtime are inside it), so an empty parent is enough.
#
# Run once per machine before `mvn -Prapids-explain ...`. Idempotent; needs no network when the
# install plugin is already in the local repository. Honours MAVEN_REPO_LOCAL (else ~/.m2/repository).
set -euo pipefail

VERSION=26.08.1
ARTIFACT=rapids-4-spark-parent_2.13
REPO="${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}"
TARGET="$REPO/com/nvidia/$ARTIFACT/$VERSION/$ARTIFACT-$VERSION.pom"

if [[ -f "$TARGET" ]]; then
  echo "install-rapids-stub-parent: $TARGET already present"
  exit 0
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/stub.pom" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.nvidia</groupId>
  <artifactId>$ARTIFACT</artifactId>
  <version>$VERSION</version>
  <packaging>pom</packaging>
  <description>Stub installed by LongSieve's tools/ci/install-rapids-stub-parent.sh: the real parent is not published.</description>
</project>
POM

args=(-B -q org.apache.maven.plugins:maven-install-plugin:3.1.4:install-file
      -Dfile="$TMP/stub.pom" -DpomFile="$TMP/stub.pom" -Dpackaging=pom)
[[ -n "${MAVEN_REPO_LOCAL:-}" ]] && args+=(-Dmaven.repo.local="$MAVEN_REPO_LOCAL")
# offline first (the plugin is usually cached), online if it is not
(cd "$TMP" && (mvn -o "${args[@]}" 2>/dev/null || mvn "${args[@]}"))
echo "install-rapids-stub-parent: installed $TARGET"
