#!/usr/bin/env bash
# CI step: the job's plan under the RAPIDS Accelerator in explainOnly mode (spark-job RapidsExplainTest,
# Maven profile rapids-explain). Not executable on purpose: bin/test runs every executable
# tools/ci/*.sh before the build as an install hook; this one is a test step, called as
#   bash tools/ci/run-rapids-explain.sh
# after the main build. Downloads the 549 MiB RAPIDS jar (cuda13) on first use.
# Measured on the 2-core dev machine: ~35 s to resolve and download the jar the first time, then
# 42 s for this step (reactor compile + a 36 s test); 65 s when the machine was busy.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"$ROOT/tools/ci/install-rapids-stub-parent.sh"
cd "$ROOT"
mvn -B -ntp -pl spark-job -am test -Prapids-explain -Dtest=RapidsExplainTest -Dsurefire.failIfNoSpecifiedTests=false
