#!/usr/bin/env bash
# GPU discovery script for Spark (spark.{driver,executor,worker}.resource.gpu.discoveryScript).
# Prints the GPUs this container may use as Spark's resource JSON, e.g.
#   {"name": "gpu", "addresses": ["0","1"]}
#
# Which GPUs are listed:
#   - CUDA_VISIBLE_DEVICES set (YARN/Kubernetes device isolation, or set by hand): exactly those
#     entries, in that order, so Spark's addresses and CUDA's numbering agree (the job maps an
#     address to its position in CUDA_VISIBLE_DEVICES; see io.longsieve.job.GpuBinding).
#   - otherwise every GPU nvidia-smi reports, by index (CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA
#     count them in the same order; conf/spark-defaults.conf sets it for executors).
#   - LONGSIEVE_GPU_LIMIT=N keeps only the first N (standalone hosts shared between workers).
# Exits non-zero with a message on stderr when no GPU is found, so a misconfigured node fails at
# executor start instead of running the model on no GPU.
set -euo pipefail

addresses=()
if [[ -n "${CUDA_VISIBLE_DEVICES+x}" && -n "${CUDA_VISIBLE_DEVICES}" && "${CUDA_VISIBLE_DEVICES}" != "-1" \
      && "${CUDA_VISIBLE_DEVICES}" != "NoDevFiles" ]]; then
  IFS=',' read -r -a entries <<<"${CUDA_VISIBLE_DEVICES}"
  for e in "${entries[@]}"; do
    e="${e// /}"
    [[ -z "$e" || "$e" == -* ]] && break   # CUDA stops at the first invalid entry
    addresses+=("$e")
  done
else
  if ! command -v "${NVIDIA_SMI:-nvidia-smi}" >/dev/null 2>&1; then
    echo "getGpusResources.sh: nvidia-smi not found and CUDA_VISIBLE_DEVICES not set: no GPU to report" >&2
    exit 1
  fi
  while IFS= read -r idx; do
    idx="${idx// /}"
    [[ -n "$idx" ]] && addresses+=("$idx")
  done < <("${NVIDIA_SMI:-nvidia-smi}" --query-gpu=index --format=csv,noheader)
fi

if [[ -n "${LONGSIEVE_GPU_LIMIT:-}" ]]; then
  addresses=("${addresses[@]:0:${LONGSIEVE_GPU_LIMIT}}")
fi

if [[ ${#addresses[@]} -eq 0 ]]; then
  echo "getGpusResources.sh: no GPU found" >&2
  exit 1
fi

json=""
for a in "${addresses[@]}"; do
  json+="${json:+,}\"${a}\""
done
echo "{\"name\": \"gpu\", \"addresses\": [${json}]}"
