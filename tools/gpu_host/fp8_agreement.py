#!/usr/bin/env python3
"""Greedy-token agreement of two engine runs on the same documents (issue 39: the FP8 engine against the
bf16 engine on the FP8 quantization of the same weights, tools/gpu_host/make_fp8_checkpoint.py --from).

Reads the generated lines that `longsieve-gpu generate` prints (bench_e2e.py keeps them in its engine-N.log:
one line of words "t123 t9 ..." per (document, token count), in the order of the runs) from two logs and
reports, per run: tokens compared, the first position where the two differ, and the fraction of positions
that agree. Free-running greedy decoding: after the first difference the two continue from different
prefixes, so the positions after it say little; "first difference" is the number to read. (A teacher-forced
top-1 agreement needs both engines' logits on the same prefixes; the fidelity tooling of the engine, not
this script, is where that belongs.)

    python3 tools/gpu_host/fp8_agreement.py /tmp/e2e-bf16/engine-0.log /tmp/e2e-fp8/engine-0.log
"""
import json
import re
import sys

GENERATED = re.compile(r"^(t\d+|<\|[a-z_0-9]+\|>)( (t\d+|<\|[a-z_0-9]+\|>))*$")


def generated_lines(path):
    with open(path) as f:
        return [line.split() for line in (raw.strip() for raw in f) if len(line) > 20 and GENERATED.match(line)]


def agreement(a, b):
    n = min(len(a), len(b))
    first = next((i for i in range(n) if a[i] != b[i]), n)
    same = sum(1 for i in range(n) if a[i] == b[i])
    return {"tokens": n, "first_difference": first, "positional_agreement": same / n if n else float("nan")}


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    runs_a, runs_b = generated_lines(argv[1]), generated_lines(argv[2])
    if len(runs_a) != len(runs_b):
        print(f"warning: {len(runs_a)} generated lines in {argv[1]}, {len(runs_b)} in {argv[2]}: pairing in order")
    rows = [agreement(a, b) for a, b in zip(runs_a, runs_b)]
    for i, r in enumerate(rows):
        print(f"run {i}: {r['tokens']} tokens, first difference at {r['first_difference']}, "
              f"positional agreement {r['positional_agreement']:.3f}")
    print(json.dumps({"runs": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
