#!/usr/bin/env bash
# Copies the few official files tools/gpu_host/official_crosscheck.py imports into .official/ (ignored by
# git: the official code is NEVER committed here; TokenSelect's repository has no licence at all). Run it on
# the development machine, then carry .official/ to the GPU host with the device call (it has no network).
#
#   tools/gpu_host/fetch_official.sh TSA_GIT TOKENSELECT_GIT [DEST]
#
# TSA_GIT / TOKENSELECT_GIT: a clone, or a bare git directory (what the `fetch` tool leaves in
# /work/.mirror/<owner>+<name>/repo), of github.com/dongwonjo/Token-Sparse-Attention (MIT) and
# github.com/pzs19/TokenSelect. The files are taken at the commits read for docs/sparse-policies.md, so a
# later upstream change cannot slip in unnoticed; DEST defaults to .official.
#   .official/Token-Sparse-Attention/sparse_attn/token_sparse/{sparse_cluster,kernel}.py + LICENSE
#       SparseCluster.get_index, triton_get_attn_cache and its two Triton kernels, repeat_kv
#   .official/TokenSelect/patcher/token_retrieval.py
#       TokenRetriever.retrieval_indices / get_topk_tokens, paged_matmul and its Triton kernel, RotaryEmbedding
set -euo pipefail
TSA_GIT="${1:?usage: fetch_official.sh TSA_GIT TOKENSELECT_GIT [DEST]}"
TS_GIT="${2:?usage: fetch_official.sh TSA_GIT TOKENSELECT_GIT [DEST]}"
DEST="${3:-.official}"
TSA_COMMIT=17b64cbb573fb7c82bd1836d32fade8d17ae1e54   # "Update README.md" after v1.0.1
TS_COMMIT=8e1e97f03e4e37f38f3dd15d1987fa59e80cdb43    # "update readme", the last of its two commits

take() {  # take GIT COMMIT PATH DEST_ROOT
  mkdir -p "$4/$(dirname "$3")"
  git -C "$1" show "$2:$3" >"$4/$3" || { echo "fetch_official: $3 not at $2 in $1" >&2; exit 1; }
}
for f in LICENSE sparse_attn/token_sparse/sparse_cluster.py sparse_attn/token_sparse/kernel.py; do
  take "$TSA_GIT" "$TSA_COMMIT" "$f" "$DEST/Token-Sparse-Attention"
done
take "$TS_GIT" "$TS_COMMIT" patcher/token_retrieval.py "$DEST/TokenSelect"
echo "$TSA_COMMIT Token-Sparse-Attention" >"$DEST/COMMITS"
echo "$TS_COMMIT TokenSelect" >>"$DEST/COMMITS"
echo "fetch_official: $(find "$DEST" -name '*.py' | wc -l) files in $DEST" >&2
