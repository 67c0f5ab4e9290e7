#!/usr/bin/env python3
"""The CPU backend against PyTorch CPU, side by side (issue 35 item 4). One command, one run:

    /work/venv-torch/bin/python tools/bench_cpu_peer.py --out /tmp/cpu-peer

Needs torch and transformers (any Python that has them; CI does not run this) and the engine build
(bin/longsieve builds it on first use). For each checkpoint, the same token ids and the same thread
count on both sides:

  checkpoints  "bundled": models/longsieve-needle-7m, copied into a temp folder (config.json and the
               tokenizer copied, the weights linked) whose max_position_embeddings is raised only if a
               length plus the decode steps exceeds it (the copy's value is printed and recorded);
               "random-100m": LlamaForCausalLM with random weights, about 100M parameters (768 wide,
               12 layers, 12 query / 4 KV heads of 64, SwiGLU 2048, vocabulary 32000, tied
               embeddings), written by transformers' save_pretrained into a temp folder at benchmark
               time (bf16, like the bundled model) with a word-level tokenizer.json so the engine
               loads it. Nothing is committed or downloaded.
  token ids    BOS then random ids from a fixed seed, one list per length, shared by both sides.
  ceiling      one core's fp32 FMA rate from a calibration loop (gpu-bench CpuCeiling: sixteen
               independent vector FMA chains, per thread CPU second, best of 8).
  PyTorch      in a subprocess: torch.set_num_threads(T) (and OMP/MKL_NUM_THREADS), from_pretrained in
               fp32 with attn_implementation="sdpa", torch.inference_mode(); an untimed warm-up
               (a 512-token prefill and 4 decode steps); then per length and repeat one prefill
               (forward of the whole prompt with logits_to_keep=1, argmax) and N-1 decode steps (one
               token each on the DynamicCache, argmax): prefill seconds, decode ms per token.
  engine       bin/longsieve generate --device cpu --threads T --prompt-ids (each length --repeats
               times, one JVM per checkpoint) --max-new-tokens N --ignore-eos --stats-json, after
               an untimed warm-up request of --warmup-tokens and --warmup-runs untimed whole requests
               on the shortest prompt (so JIT compilation is not in the figures; PyTorch gets the same
               untimed requests); prefill_ms and decode_ms_per_token from the stats, prefill chunk as given
               (default the product's 2048, EngineSpec.DEFAULT_PREFILL_CHUNK).
  rounds       --rounds N runs both sides N times per checkpoint (a new PyTorch process and a new JVM each
               time), PyTorch first in the first round, the engine first in the next, and so on: on a
               shared host whose speed drifts, each round's ratio compares the two sides under the
               same conditions; the table then shows every round's ratio beside the pooled medians.
  figures      medians over the repeats (of all rounds); prefill tokens/s; FLOPs of the prefill (linear: 2 x layer
               weights x L + the LM head on one row; causal attention: 4 x heads x head_dim x
               L(L+1)/2 x layers) per second, and as a share of T x the one-core ceiling; the load
               (uptime) before and after each side.
Writes OUT/cpu-peer.json and OUT/cpu-peer.md (the tables) and prints the tables.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUNDLED = os.path.join(REPO, "models", "longsieve-needle-7m")
RANDOM_100M = dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
                   num_key_value_heads=4, head_dim=64, vocab_size=32000, max_position_embeddings=32768,
                   rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=1,
                   eos_token_id=2, pad_token_id=0)


def log(msg):
    print(f"[cpu-peer {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ---------------------------------------------------------------- FLOPs and tables (pure)

def prefill_flops(cfg, L):
    """(linear, attention) FLOPs of a causal prefill of L tokens; the LM head runs on the last row only."""
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or h // heads
    layer_weights = h * heads * d + 2 * h * kv * d + heads * d * h + 3 * h * inter
    linear = 2.0 * layers * layer_weights * L + 2.0 * cfg["vocab_size"] * h
    attention = 4.0 * heads * d * (L * (L + 1) / 2) * layers
    return linear, attention


def fmt(v, digits):
    return "" if v is None else f"{v:,.{digits}f}"


def table(name, cfg, rows, ceiling, threads):
    """Markdown rows for one checkpoint; rows: list of dicts with L, torch and engine medians."""
    top = threads * ceiling if ceiling else None
    out = [f"**{name}** ({cfg['num_hidden_layers']} layers, {cfg['hidden_size']} wide, "
           f"{cfg['num_attention_heads']}/{cfg['num_key_value_heads']} heads of "
           f"{cfg.get('head_dim') or cfg['hidden_size'] // cfg['num_attention_heads']}; "
           f"max_position_embeddings {cfg['max_position_embeddings']})", "",
           "| prompt tokens | PyTorch prefill s | engine prefill s | prefill speed-up | PyTorch tok/s | engine tok/s "
           "| PyTorch GFLOP/s | engine GFLOP/s | engine of ceiling | PyTorch decode ms/tok | engine decode ms/tok "
           "| decode speed-up |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lin, att = prefill_flops(cfg, r["L"])
        tp, ep, td, ed = r.get("torch_prefill_s"), r.get("engine_prefill_s"), r.get("torch_decode_ms"), r.get("engine_decode_ms")
        out.append("| " + " | ".join([
            f"{r['L']:,}", fmt(tp, 2), fmt(ep, 2), (fmt(tp / ep, 2) + "x") if tp and ep else "",
            fmt(r["L"] / tp, 0) if tp else "", fmt(r["L"] / ep, 0) if ep else "",
            fmt((lin + att) / tp / 1e9, 1) if tp else "", fmt((lin + att) / ep / 1e9, 1) if ep else "",
            fmt((lin + att) / ep / 1e9 / top, 2) if ep and top else "",
            fmt(td, 2), fmt(ed, 2), (fmt(td / ed, 2) + "x") if td and ed else ""]) + " |")
    return out


# ---------------------------------------------------------------- checkpoints and ids

def bundled_copy(dst, need_positions):
    """The bundled model in a temp folder: config raised to need_positions only when its own is smaller."""
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(BUNDLED):
        src = os.path.join(BUNDLED, f)
        if f.endswith(".safetensors"):
            os.symlink(src, os.path.join(dst, f))
        elif f.endswith(".json"):
            shutil.copy(src, os.path.join(dst, f))
    path = os.path.join(dst, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    note = f"max_position_embeddings {cfg['max_position_embeddings']} (unchanged: covers {need_positions})"
    if cfg["max_position_embeddings"] < need_positions:
        note = f"max_position_embeddings raised from {cfg['max_position_embeddings']} to {need_positions} in the temp copy"
        cfg["max_position_embeddings"] = need_positions
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2)
    return cfg, note


def random_checkpoint(dst):
    """LlamaForCausalLM with random weights (seed 0), save_pretrained in bf16, plus a word-level tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**RANDOM_100M)).to(torch.bfloat16)
    model.save_pretrained(dst)
    params = sum(p.numel() for p in model.parameters())
    vocab = {f"t{i}": i for i in range(RANDOM_100M["vocab_size"])}
    specials = {0: "<pad>", 1: "<s>", 2: "</s>"}
    for i, tok in specials.items():
        del vocab[f"t{i}"]
        vocab[tok] = i
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in specials.items()]
    with open(os.path.join(dst, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
                   "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
                   "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "t3"}}, f)
    with open(os.path.join(dst, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                   "pad_token": "<pad>"}, f)
    with open(os.path.join(dst, "config.json")) as f:
        return json.load(f), f"{params / 1e6:.1f}M parameters, random (seed 0), written by save_pretrained"


def write_ids(folder, cfg, lengths, seed):
    """BOS then random ids below the special ones, one file per length; returns {L: path}."""
    bos = cfg["bos_token_id"]
    top = bos if bos > 2 else cfg["vocab_size"]  # the bundled model's specials start at BOS; the random one's end at 2
    files = {}
    for L in lengths:
        r = random.Random(seed * 1000003 + L)
        ids = [bos] + [r.randrange(3, top) for _ in range(L - 1)]
        files[L] = os.path.join(folder, f"ids-{L}.txt")
        with open(files[L], "w") as f:
            f.write(" ".join(map(str, ids)))
    return files


# ---------------------------------------------------------------- the two sides

def torch_worker(args):
    """Runs in its own process: the PyTorch side of one checkpoint, JSON on stdout's last line."""
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32, attn_implementation="sdpa").eval()
    files = json.loads(args.ids_json)

    def run(ids, steps):
        x = torch.tensor([ids])
        t0 = time.perf_counter()
        out = model(x, use_cache=True, logits_to_keep=1)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        prefill = time.perf_counter() - t0
        cache, times = out.past_key_values, []
        for _ in range(steps - 1):
            t = time.perf_counter()
            out = model(tok, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            times.append(time.perf_counter() - t)
        return prefill, 1000 * sum(times) / len(times)

    result = {}
    with torch.inference_mode():
        first = [int(v) for v in open(files[min(files, key=int)]).read().split()]  # the shortest prompt
        run(first[:512], 5)  # warm-up, not timed
        for _ in range(args.warmup_runs):  # the same untimed whole requests the engine gets
            run(first, args.steps)
        for L, path in files.items():
            ids = [int(v) for v in open(path).read().split()]
            samples = [run(ids, args.steps) for _ in range(args.repeats)]
            result[L] = {"prefill_s": [s[0] for s in samples], "decode_ms": [s[1] for s in samples], "load": load_average()}
            print(f"torch L={L} prefill {[round(s[0], 3) for s in samples]} decode {[round(s[1], 2) for s in samples]}",
                  file=sys.stderr, flush=True)
    print(json.dumps({"torch": torch.__version__, "runs": result}))


def torch_side(args, model_dir, files):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", "--model-dir", model_dir, "--threads",
           str(args.threads), "--repeats", str(args.repeats), "--steps", str(args.steps), "--warmup-runs",
           str(args.warmup_runs), "--ids-json",
           json.dumps({str(L): p for L, p in files.items()})]
    out = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def launcher(args, root):
    """The engine's command: the checkout's bin/longsieve, or --engine-cmd (a portable bundle's longsieve-gpu)."""
    return args.engine_cmd.split() if args.engine_cmd and root == args.engine_root else [os.path.join(root, "bin", "longsieve")]


def engine_side(args, root, model_dir, files):
    stats = os.path.join(tempfile.mkdtemp(prefix="cpu-peer-engine-"), "stats.jsonl")
    cmd = launcher(args, root) + ["generate", "--model", model_dir, "--device", "cpu", "--threads",
           str(args.threads), "--prefill-chunk", str(args.chunk), "--max-new-tokens", str(args.steps), "--ignore-eos",
           "--warmup-tokens", str(args.warmup_tokens), "--stats-json", stats]
    cmd += ["--prompt-ids", files[min(files)]] * args.warmup_runs  # untimed: their stats lines are dropped below
    for L in files:
        cmd += ["--prompt-ids", files[L]] * args.repeats
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    runs = {}
    with open(stats) as f:
        for line in f.readlines()[args.warmup_runs:]:
            s = json.loads(line)
            r = runs.setdefault(str(s["input_tokens"]), {"prefill_s": [], "decode_ms": []})
            r["prefill_s"].append(s["prefill_ms"] / 1000)
            r["decode_ms"].append(s["decode_ms_per_token"])
    for L, r in runs.items():
        log(f"engine L={L} prefill {[round(v, 3) for v in r['prefill_s']]} decode {[round(v, 2) for v in r['decode_ms']]}")
    return runs


def ceiling(args, root):
    if args.engine_cmd:
        cmd = args.engine_cmd.split() + ["main", "io.longsieve.bench.CpuCeiling"]
    else:
        cp = f"{root}/gpu-bench/target/classes:" + open(f"{root}/spark-job/target/runtime-classpath.txt").read().strip()
        cmd = ["java", "--add-modules=jdk.incubator.vector", "-cp", cp, "io.longsieve.bench.CpuCeiling"]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=tempfile.mkdtemp(prefix="cpu-peer-"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lengths", default="2048,8192,16384")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds per checkpoint; each runs every side (repeats each), the order reversed from one "
                         "round to the next, so a host that slows down or speeds up mid-run hits both sides alike")
    ap.add_argument("--steps", type=int, default=32, help="new tokens per request (decode steps + 1)")
    ap.add_argument("--models", default="bundled,random-100m")
    ap.add_argument("--chunk", type=int, default=2048, help="the engine's prefill chunk (the product's default)")
    ap.add_argument("--warmup-tokens", type=int, default=2048)
    ap.add_argument("--warmup-runs", type=int, default=2,
                    help="untimed whole requests (the shortest prompt, all the new tokens) before the timed ones, "
                         "on both sides: one short warm-up request left the JVM still compiling in the first "
                         "timed request (its prefill took 1.3-1.5x and its decode 2.3x the later repeats')")
    ap.add_argument("--engine-root", default=REPO, help="checkout whose bin/longsieve is measured")
    ap.add_argument("--engine-cmd", help="command that runs the engine instead of ENGINE_ROOT/bin/longsieve, e.g. "
                    "build/bundle/longsieve-gpu on a host without Maven (it must take generate and main CLASS)")
    ap.add_argument("--baseline-root", help="another checkout measured the same way (an earlier engine)")
    ap.add_argument("--baseline-lengths", default="2048,8192", help="lengths the baseline runs (it may be slow)")
    ap.add_argument("--baseline-models", default="bundled", help="checkpoints the baseline runs")
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model-dir", help=argparse.SUPPRESS)
    ap.add_argument("--ids-json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        torch_worker(args)
        return
    lengths = [int(x) for x in args.lengths.split(",")]
    os.makedirs(args.out, exist_ok=True)
    roots = [("engine", args.engine_root)] + ([("baseline", args.baseline_root)] if args.baseline_root else [])
    for _, root in roots:  # builds the engine when its sources changed (unpacks a bundle), outside the timings
        subprocess.run(launcher(args, root) + ["generate", "--help"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "threads": args.threads, "lengths": lengths,
              "repeats": args.repeats, "rounds": args.rounds, "steps": args.steps, "chunk": args.chunk, "load_start": load_average(),
              "cpu": open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].split("\n")[0].strip(),
              "ceiling": ceiling(args, args.engine_root), "models": {}}
    log(f"ceiling {report['ceiling']}, load {report['load_start']}")
    work = tempfile.mkdtemp(prefix="cpu-peer-models-")
    md = []
    for name in args.models.split(","):
        folder = os.path.join(work, name)
        need = max(lengths) + args.steps + 1
        cfg, note = bundled_copy(folder, need) if name == "bundled" else random_checkpoint(folder)
        log(f"{name}: {note}")
        files = write_ids(folder, cfg, lengths, args.seed)
        entry = {"note": note, "config": cfg, "load": {"torch_before": load_average()}, "rounds": []}
        def torch_runs():
            out = torch_side(args, folder, files)
            entry["torch_version"] = out["torch"]
            return out["runs"]

        sides = [("torch", torch_runs)]
        for label, root in roots:
            if label == "baseline":
                if name not in args.baseline_models.split(","):
                    continue
                keep = [int(x) for x in args.baseline_lengths.split(",")]
                sides.append((label, lambda root=root, keep=keep: engine_side(
                    args, root, folder, {L: p for L, p in files.items() if L in keep})))
            else:
                sides.append((label, lambda root=root: engine_side(args, root, folder, files)))
        for k in range(args.rounds):
            runs = {}
            for label, run in (sides if k % 2 == 0 else sides[::-1]):
                entry["load"][f"{label}_before_round{k}"] = load_average()
                runs[label] = run()
            entry["rounds"].append(runs)
        entry["load"]["engine_before"] = entry["load"]["engine_before_round0"]
        entry["load"]["engine_after"] = load_average()
        for label, _ in sides:  # every round's samples together, per side and length
            merged = entry[label] = {}
            for runs in entry["rounds"]:
                for L, r in runs[label].items():
                    m = merged.setdefault(str(L), {"prefill_s": [], "decode_ms": []})
                    m["prefill_s"] += r["prefill_s"]
                    m["decode_ms"] += r["decode_ms"]
        entry["torch"] = {"torch": entry.pop("torch_version"), "runs": entry["torch"]}  # the shape one run had
        report["models"][name] = entry
        rows = []
        for L in lengths:
            t, e = entry["torch"]["runs"][str(L)], entry["engine"][str(L)]
            row = {"L": L, "torch_prefill_s": statistics.median(t["prefill_s"]), "torch_decode_ms": statistics.median(t["decode_ms"]),
                   "engine_prefill_s": statistics.median(e["prefill_s"]), "engine_decode_ms": statistics.median(e["decode_ms"])}
            if args.rounds > 1:  # the ratio within each round, where both sides met the same host
                row["round_prefill_ratios"] = [statistics.median(rr["torch"][str(L)]["prefill_s"]) /
                                               statistics.median(rr["engine"][str(L)]["prefill_s"]) for rr in entry["rounds"]]
                row["round_decode_ratios"] = [statistics.median(rr["torch"][str(L)]["decode_ms"]) /
                                              statistics.median(rr["engine"][str(L)]["decode_ms"]) for rr in entry["rounds"]]
            if str(L) in entry.get("baseline", {}):
                b = entry["baseline"][str(L)]
                row["baseline_prefill_s"], row["baseline_decode_ms"] = statistics.median(b["prefill_s"]), statistics.median(b["decode_ms"])
            rows.append(row)
        entry["medians"] = rows
        md += table(name, cfg, rows, report["ceiling"]["fma_gflops_per_cpu_second"], args.threads)
        if args.rounds > 1:
            md += ["", "Speed-up within each round (PyTorch median / engine median of that round), in round order: " + "; ".join(
                f"{r['L']:,}: prefill " + ", ".join(f"{x:.2f}" for x in r["round_prefill_ratios"]) + ", decode " +
                ", ".join(f"{x:.2f}" for x in r["round_decode_ratios"]) for r in rows)]
        base = [r for r in rows if "baseline_prefill_s" in r]
        if base:
            md += ["", "Baseline engine (" + args.baseline_root + ", same run): prefill s " + ", ".join(
                f"{r['L']}: {r['baseline_prefill_s']:.2f}" for r in base) + "; decode ms/token " + ", ".join(
                f"{r['L']}: {r['baseline_decode_ms']:.2f}" for r in base)]
        md += ["", f"{note}. Load (1/5/15-minute averages): before PyTorch {entry['load']['torch_before']}, before the "
               f"engine {entry['load']['engine_before']}, after {entry['load']['engine_after']}.", ""]
    report["load_end"] = load_average()
    with open(os.path.join(args.out, "cpu-peer.json"), "w") as f:
        json.dump(report, f, indent=1)
    head = [f"{report['date']}, {report['cpu']}, {args.threads} threads both sides; one core's fp32 FMA ceiling "
            f"{report['ceiling']['fma_gflops_per_cpu_second']} GFLOP/s (per CPU second; "
            f"{report['ceiling']['fma_gflops_per_wall_second']} per wall second), so {args.threads} threads: "
            f"{args.threads * report['ceiling']['fma_gflops_per_cpu_second']:.0f}. Medians of {args.repeats} repeats"
            f"{f' in each of {args.rounds} rounds (sides alternating first)' if args.rounds > 1 else ''}, "
            f"{args.steps} new tokens per request, engine prefill chunk {args.chunk}, JVM warm-up excluded (an untimed "
            f"{args.warmup_tokens}-token request, then {args.warmup_runs} untimed whole requests on the shortest prompt, "
            f"on both sides). Load {report['load_start']} at the start, {report['load_end']} at the end.", ""]
    with open(os.path.join(args.out, "cpu-peer.md"), "w") as f:
        f.write("\n".join(head + md) + "\n")
    print("\n".join(head + md))
    log(f"wrote {args.out}/cpu-peer.json and cpu-peer.md")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
