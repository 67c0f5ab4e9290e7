#!/usr/bin/env bash
# Issue 18 on a GPU host: the Spark job itself, run as a user runs it, from the cluster bundle at
# build/cluster-bundle (tools/bundle/build-cluster-bundle.sh; its parts may arrive over several
# transfers). Run from the repository root:
#   tools/gpu_host/cluster_run.sh OUT STEP...
# Steps, in the order they are meant to run (each writes OUT/<step>.log and appends to OUT/summary.txt):
#   data     a random-weight Llama-3.1-8B checkpoint (tools/gpu_host/bench_e2e.py worker-ckpt; reused
#            when complete) and the documents: eight 32K-token summaries, a 120K one, id files
#   small    the bundled model on examples/docs.jsonl: CPU in local mode, then the GPU in
#            local-cluster mode (one executor owning the GPU, four task slots sharing its engine);
#            outputs compared document by document; stats backend; the report written
#   sticky   the bundled model on the GPU with an injected sticky CUDA error on one document: the
#            executor exits with 45, Spark replaces it, every row ok
#   big      the 8B checkpoint: eight 32K documents through the job, then the engine alone on the
#            same documents in the same call (docs/hour and per-document times)
#   kill     the 8B job again, the executor JVM killed with SIGKILL mid-stage: Spark replaces it,
#            every doc_id exactly once, GPU memory back to where it was before the run
#   oom      the 8B job with the engine's GPU share cut (spark.longsieve.gpuMemoryFraction) so that
#            the 120K document's KV cache cannot fit: an oom row, the 32K documents ok, exit 0
set -uo pipefail
OUT="$(realpath -m "${1:?OUT}")"; shift
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
export PYTHONUNBUFFERED=1
B=build/cluster-bundle/longsieve-cluster
WORK=/tmp/lsc                                  # outputs of the runs (kept while the host stays up)
CKPT=${E2E_CKPT:-/tmp/longsieve-e2e-llama8b}
SMALL=$PWD/models/longsieve-needle-7m         # absolute: executors run in their own folders
mkdir -p "$WORK"
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }

# One executor that owns GPU 0 through Spark's resource scheduling on a local-cluster worker, with
# conf/spark-defaults.conf (the plugin, JVM flags, retries) and the GPU asks it ships commented out
# turned on (4 task slots at 0.25 GPU each, the discovery script).
cluster_conf() {
  echo --master "local-cluster[1,4,${WORKER_MB:-65536}]" --conf-file conf/spark-defaults.conf \
    --conf spark.worker.resource.gpu.amount=1 --conf spark.executor.resource.gpu.amount=1 \
    --conf spark.task.resource.gpu.amount=0.25 \
    --conf "spark.worker.resource.gpu.discoveryScript=$PWD/conf/getGpusResources.sh" \
    --conf "spark.executor.resource.gpu.discoveryScript=$PWD/conf/getGpusResources.sh" \
    --conf spark.executor.memory=${EXECUTOR_MEMORY:-24g} --conf spark.longsieve.progressIntervalSeconds=10
}

# python3 helpers over the job's Parquet output (pyarrow is on the host)
py_rows() { # OUTPUT_DIR RUN_ID -> one line: rows, distinct doc_ids, status counts, backends
  python3 - "$1" "$2" <<'EOF'
import sys, collections, pyarrow.parquet as pq, pyarrow.dataset as ds
out, run = sys.argv[1], sys.argv[2]
o = ds.dataset(f"{out}/outputs", format="parquet", partitioning="hive").to_table().to_pylist()
s = ds.dataset(f"{out}/stats", format="parquet", partitioning="hive").to_table().to_pylist()
o = [r for r in o if str(r.get("run_id")) == run]; s = [r for r in s if str(r.get("run_id")) == run]
ids = collections.Counter(r["doc_id"] for r in o)
print(f"outputs rows {len(o)}, distinct doc_ids {len(ids)}, repeated {sum(1 for v in ids.values() if v > 1)}, "
      f"status {dict(collections.Counter(r['status'] for r in o))}, stats rows {len(s)}, "
      f"backend {dict(collections.Counter(r['backend'] for r in s))}, device {sorted(set(str(r['device']) for r in s))}")
for r in o:
    if r["status"] != "ok": print("  ", r["doc_id"], r["status"], (r["error"] or "")[:300])
ok = [r for r in s if r["status"] == "ok"]
if ok:
    tot = sorted(r["total_ms"] for r in ok); pre = sorted(r["prefill_ms"] for r in ok); dec = sorted(r["decode_ms"] for r in ok)
    med = lambda v: v[len(v) // 2]
    print(f"  per document (ok): total ms median {med(tot):.0f} max {tot[-1]:.0f}; prefill median {med(pre):.0f}; "
          f"decode median {med(dec):.0f}; input tokens {sorted(set(r['input_tokens'] for r in ok))[:4]}")
    batch = sorted(r["decode_batch_mean"] for r in ok if r.get("decode_batch_mean") is not None)
    if batch:
        print(f"  documents per decode step (decode_batch_mean): median {med(batch):.2f}, min {batch[0]:.2f}, max {batch[-1]:.2f}")
EOF
}

step_data() {
  python3 tools/gpu_host/bench_e2e.py worker-ckpt --ckpt "$CKPT" --result "$OUT/ckpt.json" --seed 15 || return 1
  python3 - "$WORK" <<'EOF'
import json, os, random, sys
work = sys.argv[1]
def ids(n, seed):
    r = random.Random(seed)
    return [r.randrange(1, 128000) for _ in range(n)]
os.makedirs(f"{work}/ids", exist_ok=True)
with open(f"{work}/docs32k.jsonl", "w") as f:
    for i in range(8):
        doc = ids(32768 - 512, 18000 + i)
        with open(f"{work}/ids/d32k-{i}.ids", "w") as g:
            g.write(" ".join(map(str, doc)) + "\n")
        f.write(json.dumps({"doc_id": f"d32k-{i}", "task": "summary", "text": " ".join(f"t{t}" for t in doc)}) + "\n")
with open(f"{work}/docs-oom.jsonl", "w") as f:
    for i in range(2):
        f.write(json.dumps({"doc_id": f"fit-{i}", "task": "summary", "text": " ".join(f"t{t}" for t in ids(32768 - 512, 18100 + i))}) + "\n")
    f.write(json.dumps({"doc_id": "too-big", "task": "summary", "text": " ".join(f"t{t}" for t in ids(120000, 18200))}) + "\n")
print("documents written to", work)
EOF
}

step_small() {
  $B check || return 1
  local cpu_out=$WORK/small-cpu gpu_out=$WORK/small-gpu
  rm -rf "$cpu_out" "$gpu_out"
  local t0=$SECONDS
  $B run --input "$PWD/examples/docs.jsonl" --output "$cpu_out" --run-id cpu --device cpu --model "$SMALL" >"$OUT/small-cpu.log" 2>&1
  say "small cpu (local mode) rc=$? in $((SECONDS - t0)) s"
  t0=$SECONDS
  $B run --input "$PWD/examples/docs.jsonl" --output "$gpu_out" --run-id gpu --device cuda --model "$SMALL" $(cluster_conf) >"$OUT/small-gpu.log" 2>&1
  say "small gpu (local-cluster) rc=$? in $((SECONDS - t0)) s"
  tail -2 "$OUT/small-cpu.log" "$OUT/small-gpu.log" | tee -a "$OUT/summary.txt"
  say "small cpu: $(py_rows "$cpu_out" cpu)"
  say "small gpu: $(py_rows "$gpu_out" gpu)"
  ls "$gpu_out/report" >>"$OUT/summary.txt" 2>&1
  python3 - "$cpu_out" "$gpu_out" <<'EOF' | tee -a "$OUT/summary.txt"
import sys, pyarrow.dataset as ds
a = {r["doc_id"]: r for r in ds.dataset(f"{sys.argv[1]}/outputs", format="parquet", partitioning="hive").to_table().to_pylist()}
b = {r["doc_id"]: r for r in ds.dataset(f"{sys.argv[2]}/outputs", format="parquet", partitioning="hive").to_table().to_pylist()}
same = [d for d in a if d in b and a[d]["output"] == b[d]["output"]]
print(f"small: CPU and GPU outputs equal on {len(same)} of {len(a)} documents")
for d in sorted(set(a) - set(same)):
    x, y = a[d]["output"] or "", b.get(d, {}).get("output") or ""
    k = next((i for i in range(min(len(x), len(y))) if x[i] != y[i]), min(len(x), len(y)))
    print(f"  {d}: first difference at character {k}: cpu {x[max(0,k-20):k+30]!r} / gpu {y[max(0,k-20):k+30]!r}")
EOF
  executor_logs "$OUT/small-gpu-executors.log"
}

# the executors' stderr (the worker's work folder under the bundle's SPARK_HOME)
executor_logs() {
  local rt; rt=$(ls -d /tmp/longsieve-cluster-* 2>/dev/null | head -1)
  find "$rt/spark-home/work" -name stderr -newer "$STEP_START" 2>/dev/null | sort | while read -r f; do
    echo "== $f"; grep -h "longsieve\|LongSieve\|ExecutorEngine\|engine\|CUDA\|ERROR\|SIG" "$f" | grep -v "^\s*at " | head -40
  done >"$1"
  grep -h "engine\|exited\|Exception\|exit code" "$1" | head -8 | tee -a "$OUT/summary.txt"
  return 0
}

step_sticky() {
  local out=$WORK/sticky marker=$WORK/sticky.marker
  rm -rf "$out" "$marker"
  $B run --input "$PWD/examples/docs.jsonl" --output "$out" --run-id sticky --device cuda --model "$SMALL" $(cluster_conf) \
    --conf "spark.longsieve.test.injectStickyCudaError=niah_single-3@$marker" >"$OUT/sticky.log" 2>&1; say "sticky rc=$?"
  say "sticky: marker $( [[ -f $marker ]] && echo created || echo missing); $(py_rows "$out" sticky)"
  grep -h "exited with code\|ExecutorLost\|Lost executor\|Removing executor\|code 45" "$OUT/sticky.log" | head -5 | tee -a "$OUT/summary.txt"
  executor_logs "$OUT/sticky-executors.log"
}

step_big() {
  local out=$WORK/big
  rm -rf "$out"
  local t0; t0=$(date +%s.%N)
  $B run --input "$WORK/docs32k.jsonl" --output "$out" --run-id big --model "$CKPT" --device cuda --max-new-tokens 64 \
    --conf spark.longsieve.prefillChunk=4096 --conf spark.longsieve.docTimeoutSeconds=600 $(cluster_conf) \
    >"$OUT/big-job.log" 2>&1; local rc=$?
  local t1; t1=$(date +%s.%N)
  say "big job rc=$rc, command wall $(python3 -c "print(f'{$t1-$t0:.1f}')") s (JVMs, Spark, model load, 8 documents, writes)"
  say "big job: $(py_rows "$out" big)"
  python3 -c "import json,glob; m=json.load(open(glob.glob('$out/runs/big.json')[0])); print('big job manifest: seconds', m['seconds'], 'docs/s', m['docs_per_s'], '-> docs/hour', round(m['docs_per_s']*3600), 'output tok/s', m['output_tokens_per_s'])" | tee -a "$OUT/summary.txt"
  executor_logs "$OUT/big-executors.log"
  local args=(); for f in "$WORK"/ids/d32k-*.ids; do args+=(--prompt-ids "$f"); done
  rm -f "$OUT/alone.jsonl"
  t0=$(date +%s.%N)
  $B generate --model "$CKPT" --device cuda --max-new-tokens 64 --prefill-chunk 4096 --warmup-tokens 4096 \
    --stats-json "$OUT/alone.jsonl" "${args[@]}" >"$OUT/big-alone.log" 2>&1; rc=$?
  t1=$(date +%s.%N)
  say "engine alone rc=$rc, command wall $(python3 -c "print(f'{$t1-$t0:.1f}')") s (JVM, model load, warm-up, 8 documents one after another)"
  python3 - "$OUT/alone.jsonl" <<'EOF' | tee -a "$OUT/summary.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
tot = [r["total_ms"] for r in rows]
if tot:
    print(f"engine alone: {len(tot)} documents, total ms median {sorted(tot)[len(tot)//2]:.0f}, sum {sum(tot)/1000:.1f} s "
          f"-> {len(tot) / (sum(tot) / 1000) * 3600:.0f} docs/hour one after another")
EOF
}

step_kill() {
  local out=$WORK/kill
  rm -rf "$out"
  local before; before=$(gpu_used)
  $B run --input "$WORK/docs32k.jsonl" --output "$out" --run-id kill --model "$CKPT" --device cuda --max-new-tokens 256 \
    --conf spark.longsieve.prefillChunk=4096 $(cluster_conf) >"$OUT/kill-job.log" 2>&1 &
  local job=$!
  local pid="" t=0
  while ((t < 240)); do  # the executor, once its engine holds the weights and some KV cache
    pid=$(pgrep -f CoarseGrainedExecutorBackend | head -1)
    used=$(( $(gpu_used) - before ))   # (a container may not see its processes in nvidia-smi's list)
    [[ -n "$pid" && "$used" -gt 20000 ]] && break
    sleep 1; t=$((t + 1))
  done
  sleep 3
  say "kill: GPU memory used before the run ${before} MiB; executor pid ${pid:-none} holds ${used:-?} MiB at ${t} s; kill -9"
  [[ -n "$pid" ]] && kill -9 "$pid"
  sleep 4
  say "kill: GPU memory 4 s after the kill $(gpu_used) MiB; executors now: $(pgrep -f CoarseGrainedExecutorBackend | tr '\n' ' ')"
  wait $job; local rc=$?
  sleep 2
  say "kill job rc=$rc; GPU memory after the run $(gpu_used) MiB (before: ${before})"
  say "kill: $(py_rows "$out" kill)"
  grep -h "Lost executor\|Removing executor\|exited\|ExecutorLost\|Executor added\|Granted executor" "$OUT/kill-job.log" | head -6 | tee -a "$OUT/summary.txt"
  executor_logs "$OUT/kill-executors.log"
}

step_oom() {
  local out=$WORK/oom
  rm -rf "$out"
  # weights (15 GiB) + 13 GiB: two 32K documents' KV cache (4 GiB each) fit, the 120K one (14.7 GiB) does not
  local free frac
  free=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits | head -1)
  frac=$(python3 -c "print(round((16.1 + 12.0) * 1024 / $free, 3))")
  $B run --input "$WORK/docs-oom.jsonl" --output "$out" --run-id oom --model "$CKPT" --device cuda --max-new-tokens 32 \
    --conf spark.longsieve.prefillChunk=4096 --conf spark.longsieve.gpuMemoryFraction=$frac $(cluster_conf) \
    >"$OUT/oom-job.log" 2>&1; local rc=$?
  say "oom job rc=$rc with gpuMemoryFraction=$frac of $free MiB free"
  say "oom: $(py_rows "$out" oom)"
  executor_logs "$OUT/oom-executors.log"
}

date -u; nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv
touch "$OUT/run.log.start"
for step in "$@"; do
  t=$(date +%s); echo "== $step"
  STEP_START=$OUT/.start-$step; touch "$STEP_START"
  "step_$step"; echo "== $step rc=$? in $(( $(date +%s) - t )) s" | tee -a "$OUT/summary.txt"
done
