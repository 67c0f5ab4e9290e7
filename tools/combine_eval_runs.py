#!/usr/bin/env python3
"""Combines several `eval-engine` runs over the same policies and lengths (different --seed, so other
documents) into one table, as if one run had all their documents (bench/RESULTS.md, issue 33's tables).

    python3 tools/combine_eval_runs.py RUN_DIR [RUN_DIR ...] > combined.md
    python3 tools/combine_eval_runs.py --paired 'selkv:ratio=0.5' 'selkv:ratio=0.5,merge=off' RUN_DIR ...

--paired A B compares two policies document by document (eval/docs.jsonl: the same documents ran under both)
instead: per length, the mean of A minus B in KL and in score, with its standard error, and how many documents
A did worse on; a difference inside two standard errors is not one this sample can see.

Runs whose --seed values are closer than their --per-cell share document text (a cell's i-th document is
written from seed + i, its needle at a depth set by i): the script names the documents whose id comes back
in another run, so a table can say how many of its documents are distinct texts.

Each RUN_DIR is an eval-engine --output folder (its eval/results.jsonl: one row per task, length and policy
with that cell's document count). A cell's figures are the document-weighted means of the runs' cells (KL
and top-1 weighted by the documents the fidelity pass measured, recall likewise); a length's figure is the
mean of its tasks' cells, as eval-engine's own tables do. Prints the documents per task and length, which
says how far one document moves a cell.
"""
import collections
import json
import os
import sys

FIELDS = ("accuracy", "kl_mean", "top1_agreement", "attention_recall", "attended_fraction")


def load(run_dirs):
    cells = collections.defaultdict(lambda: collections.defaultdict(float))  # (task, length, policy) -> sums
    policies = []
    for d in run_dirs:
        with open(os.path.join(d, "eval", "results.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                key = (r["task"], r["length"], r["policy"])
                if r["policy"] not in policies:
                    policies.append(r["policy"])
                c = cells[key]
                n, nf = r["n_docs"], r.get("n_fidelity", 0)
                c["docs"] += n
                c["fid"] += nf
                c["accuracy"] += r["accuracy"] * n
                c["attended_fraction"] += r["attended_fraction"] * n
                for k in ("kl_mean", "top1_agreement", "attention_recall"):
                    if r.get(k) is not None and nf:
                        c[k] += r[k] * nf
                        c[k + "_n"] += nf
    return cells, policies


def cell_value(c, field):
    if field in ("accuracy", "attended_fraction"):
        return c[field] / c["docs"] if c["docs"] else None
    return c[field] / c[field + "_n"] if c[field + "_n"] else None


def shared_texts(run_dirs):
    """(documents, distinct texts) over all runs, and the ids that come back in more than one run."""
    seen = collections.Counter()
    for d in run_dirs:
        path = os.path.join(d, "eval", "docs.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                seen.update({(r["doc_id"], r["length"]) for r in map(json.loads, f)})
    return sum(seen.values()), len(seen), sorted(k for k, n in seen.items() if n > 1)


def main(run_dirs):
    cells, policies = load(run_dirs)
    total, distinct, repeated = shared_texts(run_dirs)
    if repeated:
        print(f"{total} documents over all runs, {distinct} distinct texts: {len(repeated)} ids come back in another "
              f"run (same text, needle at another depth), e.g. {', '.join(f'{i}@{L}' for i, L in repeated[:4])}")
    lengths = sorted({k[1] for k in cells})
    tasks = sorted({k[0] for k in cells})
    docs = {L: {t: int(cells[(t, L, policies[0])]["docs"]) for t in tasks} for L in lengths}
    print(f"runs: {len(run_dirs)}; documents per task and length: "
          + "; ".join(f"{L}: " + ", ".join(f"{t} {docs[L][t]}" for t in tasks) for L in lengths))
    head = ["policy"]
    for name in ("acc", "KL", "top-1", "recall", "attended"):
        head += [f"{name} {L}" for L in lengths]
    print("| " + " | ".join(head) + " |")
    print("|---" + "|---:" * (len(head) - 1) + "|")
    for p in policies:
        row = [f"`{p}`"]
        for field, fmt in (("accuracy", "{:.1f}"), ("kl_mean", "{:.4f}"), ("top1_agreement", "{:.1f}"),
                           ("attention_recall", "{:.3f}"), ("attended_fraction", "{:.2f}")):
            for L in lengths:
                vals = [cell_value(cells[(t, L, p)], field) for t in tasks]
                vals = [v for v in vals if v is not None]
                if not vals:
                    row.append("")
                    continue
                m = sum(vals) / len(vals)
                row.append(fmt.format(100 * m if field in ("accuracy", "top1_agreement") else m))
        print("| " + " | ".join(row) + " |")


def paired(a, b, run_dirs):
    rows = collections.defaultdict(dict)  # (run, doc, length) -> policy -> row
    for d in run_dirs:
        with open(os.path.join(d, "eval", "docs.jsonl")) as f:
            for r in map(json.loads, f):
                if r["policy"] in (a, b):
                    rows[(d, r["doc_id"], r["length"])][r["policy"]] = r
    print(f"paired: `{a}` minus `{b}`, document by document")
    print("| length | documents | KL diff (mean ± s.e.) | A's KL higher on | score diff (mean ± s.e.) | A scored lower on |")
    print("|---:|---:|---|---:|---|---:|")
    for L in sorted({k[2] for k in rows}):
        pairs = [(v[a], v[b]) for k, v in rows.items() if k[2] == L and a in v and b in v]
        kl, kl_mean, kl_se = differences(pairs, "kl_mean")
        score, score_mean, score_se = differences(pairs, "score")
        print(f"| {L} | {len(kl)} | {kl_mean:+.4f} ± {kl_se:.4f} | {sum(d > 0 for d in kl)} "
              f"| {score_mean:+.3f} ± {score_se:.3f} | {sum(d < 0 for d in score)} |")


def differences(pairs, field):
    """A minus B in field over the pairs that have it on both sides: (differences, mean, standard error)."""
    diffs = [x[field] - y[field] for x, y in pairs if x.get(field) is not None and y.get(field) is not None]
    n = len(diffs)
    mean = sum(diffs) / n
    se = (sum((d - mean) ** 2 for d in diffs) / (n - 1) / n) ** 0.5 if n > 1 else float("nan")
    return diffs, mean, se


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--paired":
        paired(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        main(sys.argv[1:])
