#!/usr/bin/env python3
"""LongSieve's Token Sparse Attention and TokenSelect selections against the official code (issue 39 item 3).

The engine dumps every sparse selection with its inputs (`generate --dump-selections DIR`, gpu-engine
cli/SelectionDump.java: the queries and keys as the official code takes them, the engine's selected slots
and scores); this script runs the OFFICIAL selection functions on the same tensors and compares the index
sets, per head (TSA) or per layer list (TokenSelect): overlap, differences, and whether each difference is
a tie. Prints a table; exit status 0 when every difference is a tie, 1 when one is not, 2 on bad input or
when nothing was comparable.

    tools/gpu_host/fetch_official.sh TSA_GIT TOKENSELECT_GIT      # once: the official files into .official/
    python3 tools/gpu_host/official_crosscheck.py --official .official DUMP_DIR [DUMP_DIR ...]
    (no CUDA: PYTHONPATH=<a triton install> ... --device cpu; the Triton kernels then run in its interpreter)

Official code called, unchanged (.official/, never committed here):
  TSA (dongwonjo/Token-Sparse-Attention, MIT): sparse_cluster.SparseCluster.get_index (the two-pass proxy
    attention kernels through kernel.triton_get_attn_cache, avg-pool, head mean, cumulative cut at the
    coverage, per-head top-k ++ window, sorted) on Q padded to the cache length (only the last W rows are
    read) and K expanded with sparse_cluster.repeat_kv.
  TokenSelect (pzs19/TokenSelect): token_retrieval.TokenRetriever.retrieval_indices (RotaryEmbedding at
    n_local + i, fingerprint mean, paged_matmul's Triton kernel into bf16 scores, softmax vote, [max-pool],
    top-k, sort, sinks ++ top-k ++ local) over a key pool holding the dumped pre-RoPE keys.
Re-expressed here, quoted where it is done, only to judge ties (they choose nothing): the official scores
that get_index ranks, and TokenSelect's vote line over paged_matmul's scores, once as shipped (bf16) and once
into an fp32 buffer ("official-f32": the same kernel and lines at fp32).
Stand-ins: token_retrieval.py imports SGLang 0.2.13 and vLLM at module level for its serving patches
(patch_*), which are not called here; empty stand-in modules satisfy those imports. With --device cpu the
Triton kernels run in Triton's interpreter, which has no benchmarker: each autotuned TSA kernel is pinned to
one of its own configs (tile sizes only), and triton_get_attn_cache's `assert query_states.is_cuda` is met by
passing tensor views whose is_cuda is True. tl.dot's fp32 inputs use IEEE fp32 (TRITON_F32_DEFAULT=ieee):
the official runs fed bf16, which TF32 holds exactly, and the dumps of the CPU engine are not bf16.

Ties. TSA: a differing token is a tie when its official score is within --tsa-rel (2^-7, one bf16 step: the
official runs cast the proxy to bf16 before ranking) of the boundary score (between the two keep counts
when they differ; a keep count difference is itself a tie when tau lies within that much of the official
cumulative mass at every cut between them). TokenSelect as shipped rounds the vote logits to bf16, so its
order is only as good as that rounding: a difference is a tie when the official bf16 votes of the token and
of the official boundary token differ by no more than their own rounding errors (bf16 vote minus
official-f32 vote, each) plus one bf16 step, or when the official code itself chooses differently at bf16 and
at fp32 and the engine chooses as it does at fp32, or when the token is an fp32 tie (below): the numpy
re-creation of the bf16 votes does not follow Triton's accumulation order, so the first bound misses some of
the official kernel's own rounding. The engine scores in fp32, so official-f32 is the comparison that decides.
official-f32: a tie within --f32-rel (2^-14) of the boundary.
"""
import argparse
import importlib.util
import json
import os
import sys
import types

import numpy as np

TSA_REL = 2.0 ** -7
F32_REL = 2.0 ** -14


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dumps", nargs="+", help="folders written by generate --dump-selections")
    p.add_argument("--official", required=True, help="folder of tools/gpu_host/fetch_official.sh (.official)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--max-events", type=int, default=0,
                   help="per dump, at most this many events, spread evenly (0: all); the interpreter is slow")
    p.add_argument("--tsa-rel", type=float, default=TSA_REL)
    p.add_argument("--f32-rel", type=float, default=F32_REL)
    p.add_argument("--json", help="also write the rows and the verdict as JSON here")
    return p.parse_args(argv)


def load_official(root, device):
    """The official modules: (sparse_cluster, kernel, token_retrieval); see the module docstring."""
    os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    tsa_root = os.path.join(root, "Token-Sparse-Attention")
    ts_file = os.path.join(root, "TokenSelect", "patcher", "token_retrieval.py")
    for need in (os.path.join(tsa_root, "sparse_attn", "token_sparse", "sparse_cluster.py"), ts_file):
        if not os.path.isfile(need):
            sys.exit(f"official_crosscheck: {need} missing: run tools/gpu_host/fetch_official.sh first")
    sys.path.insert(0, tsa_root)
    from sparse_attn.token_sparse import kernel, sparse_cluster  # noqa: E402  (namespace package)
    stub_serving_imports()
    spec = importlib.util.spec_from_file_location("official_token_retrieval", ts_file)
    token_retrieval = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(token_retrieval)
    if device == "cpu":
        # the interpreter cannot benchmark: one of each kernel's own autotune configs (tile sizes)
        kernel._stats_m_l_kernel.configs = [kernel._stats_m_l_kernel.configs[1]]        # BK 128, BQ 16
        kernel._prefix_meanprob_kernel.configs = [kernel._prefix_meanprob_kernel.configs[2]]  # BK 64, BQ 32
    return sparse_cluster, kernel, token_retrieval


def stub_serving_imports():
    """Empty modules for token_retrieval.py's SGLang / vLLM imports (its serving patches; never called)."""
    class Anything:
        def __init__(self, *a, **k):
            pass

    def module(name):
        m = types.ModuleType(name)
        m.__path__ = []
        m.__getattr__ = lambda attr: Anything
        return m

    for name in ["sglang", "sglang.srt", "sglang.srt.managers", "sglang.srt.managers.schedule_batch",
                 "sglang.srt.model_executor", "sglang.srt.model_executor.forward_batch_info", "vllm", "vllm.config",
                 "vllm.model_executor", "vllm.model_executor.layers", "vllm.model_executor.layers.rotary_embedding",
                 "vllm.model_executor.model_loader", "vllm.model_executor.model_loader.loader",
                 "vllm.model_executor.model_loader.utils"]:
        sys.modules.setdefault(name, module(name))


class Dump:
    """One folder of generate --dump-selections: index.json, the event arrays and the keys per layer."""

    def __init__(self, folder):
        self.folder = folder
        with open(os.path.join(folder, "index.json")) as f:
            self.index = json.load(f)
        if self.index.get("format") != "longsieve-selection-dump/1":
            raise ValueError(f"{folder}: not a selection dump (format {self.index.get('format')!r})")
        self.config = self.index["config"]
        self.terms = policy_terms(self.index["policy"])
        self._keys = {}

    def array(self, ref):
        dtype = np.float32 if ref["file"].endswith(".f32") else np.int32
        a = np.fromfile(os.path.join(self.folder, ref["file"]), dtype=np.dtype(dtype).newbyteorder("<"))
        return a.reshape(ref["shape"])

    def keys(self, event):
        """(end, kvHeads, headDim) f32: the event's layer's keys up to its end."""
        name = event["keys"]
        if name not in self._keys:
            ref = next(k for k in self.index["keys"] if k["file"] == name)
            self._keys[name] = self.array(ref)
        return self._keys[name][: event["end"]]

    def events(self, kind, most):
        ev = [e for e in self.index["events"] if e["kind"] == kind]
        if most and len(ev) > most:
            ev = [ev[round(i * (len(ev) - 1) / (most - 1))] for i in range(most)] if most > 1 else ev[:1]
        return ev


def policy_terms(policy):
    """Canonical policy 'prefill + kv + decode' -> {'prefill': (name, {param: text}), ...}."""
    parts = [t.strip() for t in policy.split(" + ")]
    if len(parts) == 1:
        parts = [parts[0], "none", parts[0]]
    out = {}
    for slot, term in zip(("prefill", "kv", "decode"), parts):
        name, _, params = term.partition(":")
        out[slot] = (name, dict(p.split("=", 1) for p in params.split(",") if p))
    return out


def main(argv):
    args = parse_args(argv)
    import torch
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    sparse_cluster, kernel, token_retrieval = load_official(args.official, device)
    from crosscheck_methods import TokenSelectCheck, TsaCheck  # noqa: E402  (beside this file)
    rows, skipped = [], []
    for folder in args.dumps:
        try:
            dump = Dump(folder)
        except (OSError, ValueError, KeyError) as e:
            print(f"official_crosscheck: {folder}: {e}", file=sys.stderr)
            return 2
        checks = [TsaCheck(dump, sparse_cluster, kernel, device, args.tsa_rel),
                  TokenSelectCheck(dump, token_retrieval, device, args.f32_rel)]
        for check in checks:
            for event in dump.events(check.kind, args.max_events):
                why = check.not_comparable(event)
                if why:
                    skipped.append((folder, f"{check.kind} e{event['id']}", why))
                    continue
                rows.extend(check.compare(event))
    return report(rows, skipped, args.json)


def report(rows, skipped, json_path):
    header = ["dump", "method", "layer", "pos0", "rows", "end", "head", "kept e/o", "frame", "overlap", "diff", "ties",
              "non-ties", "max gap", "score rel diff"]
    table = [header] + [[str(r[h]) for h in header] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))
    groups = {}
    for r in rows:
        groups.setdefault((r["dump"], r["method"]), []).append(r)
    for (dump, method), rs in groups.items():
        print(f"summary {dump} {method}: {len(rs)} comparisons, min overlap {min(float(r['overlap']) for r in rs):.4f}, "
              f"{sum(r['diff'] for r in rs)} differing tokens, {sum(r['ties'] for r in rs)} ties, "
              f"{sum(r['non-ties'] for r in rs)} not ties, max gap {max(float(r['max gap']) for r in rs):.2e}, "
              f"max score rel diff {max(float(r['score rel diff']) for r in rs):.2e}")
    for folder, what, why in skipped:
        print(f"skipped {folder} {what}: {why}")
    bad = [r for r in rows if r["non-ties"] > 0]
    diffs = sum(r["diff"] for r in rows)
    verdict = ("no comparable selection" if not rows else
               f"{len(rows)} comparisons, {diffs} differing tokens, {sum(r['non-ties'] for r in rows)} not ties")
    print(("FAIL: " if bad or not rows else "OK: ") + verdict)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"rows": rows, "skipped": [list(s) for s in skipped], "ok": bool(rows) and not bad}, f, indent=1,
                      default=lambda o: o.item() if hasattr(o, "item") else str(o))  # numpy ints and floats
    return 2 if not rows else (1 if bad else 0)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv[1:]))
