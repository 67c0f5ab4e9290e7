#!/usr/bin/env bash
# Documents per hour per core of the real job on the CPU (docs/cpu.md): generates needle-in-a-haystack
# documents of about 2K and 8K tokens for the bundled model (the quality suite's generator,
# `bin/longsieve eval --write-suite-only`), runs `bin/longsieve run --device cpu` on each set in Spark
# local mode with N cores, and prints the job's own summary line and documents / hour / core.
#
#   tools/cpu_job_throughput.sh [CORES (default 2)] [DOCS PER TASK (default 2)] [OUT (default a temp dir)]
#
# Each set holds 5 tasks (single, multi-key, multi-value, multi-query needles and variable tracking)
# times DOCS PER TASK documents; up to 64 new tokens each (the job's default). Figures include Spark's
# start and the JIT warm-up of each run (one JVM per run), as a cluster job would see them per executor.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CORES="${1:-2}"
PER="${2:-2}"
OUT="${3:-$(mktemp -d)}"
MODEL="$ROOT/models/longsieve-needle-7m"
TASKS=niah_single,niah_multikey,niah_multivalue,niah_multiquery,vt

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for mult in 1 4; do
  tokens=$((mult * 2048))
  dir="$OUT/${tokens}"
  "$ROOT/bin/longsieve" eval --model "$MODEL" --output "$dir" --lengths "$mult" --tasks "$TASKS" --per-cell "$PER" \
    --write-suite-only >/dev/null
  docs=$(wc -l <"$dir/eval/suite.jsonl")
  start=$(date +%s.%N)
  "$ROOT/bin/longsieve" run --input "$dir/eval/suite.jsonl" --output "$dir/job" --model "$MODEL" --device cpu \
    --master "local[$CORES]" >"$dir/job.log" 2>&1
  end=$(date +%s.%N)
  summary=$(grep -o 'summary: .*' "$dir/job.log" | tail -1)
  gen=$(echo "$summary" | grep -o 'in [0-9:]* of generation' | grep -o '[0-9:]*' | awk -F: '{print $1 * 3600 + $2 * 60 + $3}')
  python3 - "$tokens" "$docs" "$CORES" "$start" "$end" "$gen" "$summary" <<'EOF'
import sys
tokens, docs, cores, start, end, gen, summary = sys.argv[1:]
docs, cores, wall, gen = int(docs), int(cores), float(sys.argv[5]) - float(sys.argv[4]), float(gen)
print(f"~{tokens} tokens: {docs} documents; job wall {wall:.1f} s (Spark start included), generation {gen:.0f} s; "
      f"{docs / (wall / 3600) / cores:,.0f} documents/hour/core over the whole job, "
      f"{docs / (gen / 3600) / cores:,.0f} over the generation stage; job summary: {summary}")
EOF
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
