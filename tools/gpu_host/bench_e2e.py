#!/usr/bin/env python3
"""End-to-end documents benchmark (issue 15 item 4): Hugging Face transformers against the LongSieve
engine on the same random-weight Llama-3.1-8B-shaped checkpoint and the same token ids, in one run on
one GPU host. No network, no downloads.

Steps, each in its own process so GPU memory is whole for the next one:
  1. checkpoint  LlamaForCausalLM(LlamaConfig(Llama-3.1-8B shapes)) built on the GPU in bf16,
                 save_pretrained in 5 GB shards (4 safetensors files), plus a word-level tokenizer.json
                 over the full 128,256-id vocabulary (the engine's loader wants one; the ids are fed as
                 they are, so it only has to decode); also the matmul ceiling (8192^3 bf16 torch.matmul).
                 Skipped when --ckpt already holds one written by this script (same shapes).
  2. documents   random ids in [0, 128000) from a fixed seed after BOS 128000, one file per document.
  3. HF          from_pretrained(sdpa, bf16, cuda); per document ONE greedy generate of max(--new-tokens)
                 tokens with min_new_tokens = max_new_tokens (EOS cannot stop it) and a stopping
                 criterion that synchronises and timestamps every token: prefill = request start to
                 the first token, total(N) = start to token N, decode ms/token = (token N - token 1) / (N - 1).
  4. engine      build/bundle/longsieve-gpu generate --prompt-ids DOC... --max-new-tokens 64,256
                 --ignore-eos --device cuda --prefill-chunk 4096 --warmup-tokens 4096 --policy P, one
                 process per policy (the model loads once per policy); each (document, N) is its own
                 request; timings from --stats-json (prefill = request start to the first token).
  5. report      per document and N: prefill s, decode ms/token, total s, tokens/s (generated / total and
                 document + generated / total), speed-up over HF, and the prefill FLOP floor: linear
                 2 * (layer parameters) * L + causal attention 2 * 2 * L^2 / 2 * heads * head_dim * layers
                 at the measured matmul ceiling. Written to OUT/e2e.json, OUT/e2e.csv and OUT/e2e.md.

Budget: one device call of <= 9 minutes. On an H200 (issue 15's figures) expect ~40 s for the
checkpoint, ~90 s for HF (32K + 128K, 256 tokens), ~60-100 s per engine policy, ~5 minutes in all. Every
step gets a timeout from what is left of --budget-s; a step that runs out is recorded and the report
is still written from what finished.

    python3 tools/gpu_host/bench_e2e.py --out /tmp/e2e                    # 32k,128k x 64,256, dense + tsa:keep=0.25
    python3 tools/gpu_host/bench_e2e.py --out /tmp/e2e --docs 32k --new-tokens 64 --policies dense
"""
import argparse
import csv
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# Llama-3.1-8B (config.json of meta-llama/Llama-3.1-8B)
DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 4096, 14336, 32, 32, 8, 128, 128256
MAX_POS, ROPE_THETA, BOS, EOS, EOT = 131072, 500000.0, 128000, 128001, 128009
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192}
MARKER = "longsieve-e2e.json"  # written last into a finished checkpoint folder
FIRST_SPECIAL = 128000         # ids from here on are special tokens; documents stay below


def log(msg):
    print(f"[e2e {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------- pure helpers (unit-tested on the CPU)

def parse_docs(spec):
    """'32k,128k,4096' -> [(name, tokens)]: Nk is N * 1024 - 512 tokens (room for 256 new tokens and the
    engine's 131,072-token context at 128k), a plain integer is that many tokens."""
    out = []
    for w in spec.split(","):
        w = w.strip().lower()
        if not w:
            continue
        if w.endswith("k"):
            n = int(w[:-1]) * 1024 - 512
        else:
            n = int(w)
        if n < 2:
            raise ValueError(f"document '{w}' is too short")
        out.append((w, n))
    return out


def parse_ints(spec):
    vals = sorted({int(x) for x in spec.split(",") if x.strip()})
    if not vals or vals[0] < 2:
        raise ValueError(f"--new-tokens wants integers >= 2, not '{spec}'")
    return vals


def doc_ids(n, seed):
    """BOS then n - 1 ids in [0, FIRST_SPECIAL) from random.Random(seed): the same list on every host."""
    r = random.Random(seed)
    return [BOS] + [r.randrange(FIRST_SPECIAL) for _ in range(n - 1)]


def layer_params():
    """Weights of the decoder layers (no embedding, no LM head, no norms): what every prompt token multiplies."""
    attn = DIM * (HEADS * HEAD_DIM) + 2 * DIM * (KV_HEADS * HEAD_DIM) + (HEADS * HEAD_DIM) * DIM
    mlp = 3 * DIM * HIDDEN
    return LAYERS * (attn + mlp)


def prefill_flops(L):
    """(linear, attention) FLOPs of a causal prefill over L tokens (the LM head runs on the last row only)."""
    linear = 2.0 * layer_params() * L + 2.0 * VOCAB * DIM
    attention = 2 * 2 * (L * L / 2) * HEADS * HEAD_DIM * LAYERS
    return linear, attention


def wordlevel_tokenizer(vocab_size):
    """tokenizer.json (Hugging Face tokenizers format) of a word-level model over every id: "t<i>" for
    ordinary ids, Llama 3's special tokens from 128000. Decoding ids gives words; encoding splits on
    whitespace. Enough for the engine's loader and for decoding the generated ids."""
    special = {BOS: "<|begin_of_text|>", EOS: "<|end_of_text|>", EOT: "<|eot_id|>",
               128006: "<|start_header_id|>", 128007: "<|end_header_id|>"}
    vocab, added = {}, []
    for i in range(vocab_size):
        if i >= FIRST_SPECIAL:
            tok = special.get(i, f"<|reserved_special_token_{i - FIRST_SPECIAL}|>")
            added.append({"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True})
        else:
            tok = f"t{i}"
        vocab[tok] = i
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "t0"}}


def write_tokenizer(ckpt):
    with open(os.path.join(ckpt, "tokenizer.json"), "w") as f:
        json.dump(wordlevel_tokenizer(VOCAB), f)
    with open(os.path.join(ckpt, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
                   "eos_token": "<|end_of_text|>", "clean_up_tokenization_spaces": False,
                   "model_max_length": MAX_POS}, f, indent=1)


def hf_marks(t0, stamps, counts):
    """From the request start t0 and one timestamp per generated token: prefill s (to the first token),
    and per N in counts total s (to token N) and decode ms/token ((token N - token 1) / (N - 1))."""
    out = {"prefill_s": stamps[0] - t0, "by_n": {}}
    for n in counts:
        if n <= len(stamps):
            out["by_n"][str(n)] = {"total_s": stamps[n - 1] - t0,
                                   "decode_ms_per_token": (stamps[n - 1] - stamps[0]) / (n - 1) * 1000}
    return out


def rows_for(doc, L, n, hf, engine_runs, ceiling_tflops):
    """Report rows of one (document, N): HF first, then each engine policy; speed-up against HF's total."""
    rows = []
    hf_total = None
    if hf is not None and "error" not in hf and str(n) in hf.get("by_n", {}):
        m = hf["by_n"][str(n)]
        hf_total = m["total_s"]
        rows.append({"impl": "HF transformers (sdpa)", "prefill_s": hf["prefill_s"],
                     "decode_ms_per_token": m["decode_ms_per_token"], "total_s": m["total_s"]})
    for policy, runs in engine_runs.items():
        r = runs.get((doc, n))
        if r is None:
            continue
        rows.append({"impl": f"LongSieve {policy}", "prefill_s": r["prefill_ms"] / 1000,
                     "decode_ms_per_token": r["decode_ms_per_token"], "total_s": r["total_ms"] / 1000,
                     "selected_fraction_mean": r.get("selected_fraction_mean"), "sparse_layers": r.get("sparse_layers")})
    lin, att = prefill_flops(L)
    floor_s = (lin + att) / (ceiling_tflops * 1e12) if ceiling_tflops else float("nan")
    for row in rows:
        row.update({"document": doc, "input_tokens": L, "new_tokens": n, "floor_prefill_s": floor_s,
                    "out_tokens_per_s": n / row["total_s"], "doc_tokens_per_s": (L + n) / row["total_s"],
                    "prefill_over_floor": row["prefill_s"] / floor_s if floor_s == floor_s else float("nan"),
                    "speedup_vs_hf": hf_total / row["total_s"] if hf_total else float("nan")})
    return rows, (lin, att, floor_s)


def fmt(v, digits):
    return "" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{digits}f}"


def markdown(rows_by_case, ceiling, meta):
    lines = [f"# End-to-end documents: HF transformers vs LongSieve ({meta.get('device', '?')})", "",
             f"Same checkpoint ({meta.get('ckpt')}, random bf16 weights, Llama-3.1-8B shapes) and the same token ids; "
             f"greedy, EOS ignored; matmul ceiling {fmt(ceiling, 0)} TFLOP/s (8192^3 bf16 torch.matmul). "
             f"HF: transformers {meta.get('transformers', '?')}, torch {meta.get('torch', '?')}.", ""]
    for (doc, L, n), (rows, (lin, att, floor_s)) in rows_by_case.items():
        lines.append(f"## {doc} ({L:,} tokens) + {n} new tokens")
        lines.append("")
        lines.append("| implementation | prefill s | decode ms/token | total s | new tok/s | doc tok/s | vs HF | prefill / floor |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            extra = ""
            if r.get("sparse_layers"):
                extra = f" (sparse layers {r['sparse_layers']}, attended {fmt(r.get('selected_fraction_mean'), 2)})"
            lines.append(f"| {r['impl']}{extra} | {fmt(r['prefill_s'], 2)} | {fmt(r['decode_ms_per_token'], 1)} | "
                         f"{fmt(r['total_s'], 2)} | {fmt(r['out_tokens_per_s'], 1)} | {fmt(r['doc_tokens_per_s'], 0)} | "
                         f"{fmt(r['speedup_vs_hf'], 2)}x | {fmt(r['prefill_over_floor'], 2)}x |")
        lines.append(f"| prefill FLOP floor | {fmt(floor_s, 2)} | | | | | | 1.00x |")
        lines.append("")
        lines.append(f"Floor: {lin:.3g} linear + {att:.3g} causal-attention FLOPs at {fmt(ceiling, 0)} TFLOP/s.")
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------- GPU workers (run as subprocesses)

def rope_kwargs(config_cls):
    """RoPE settings in whichever form this transformers version takes (tools/tinylm_common.py)."""
    if hasattr(config_cls(), "rope_parameters"):
        return {"rope_parameters": {"rope_theta": ROPE_THETA, **LLAMA3_SCALING}}
    return {"rope_theta": ROPE_THETA, "rope_scaling": dict(LLAMA3_SCALING)}


def worker_ckpt(args):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    t0 = time.time()
    dev = torch.device("cuda")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        torch.matmul(a, b)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    ts.sort()
    ceiling = 2 * 8192 ** 3 / ts[len(ts) // 2] / 1e9
    del a, b
    log(f"matmul ceiling {ceiling:.0f} TFLOP/s")
    info = {"matmul_tflops": ceiling, "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    marker = os.path.join(args.ckpt, MARKER)
    if os.path.isfile(marker) and not args.rewrite:
        with open(marker) as f:
            old = json.load(f)
        if old.get("shapes") == shapes_key() and all(os.path.isfile(os.path.join(args.ckpt, f)) for f in old.get("shards", [])):
            log(f"checkpoint {args.ckpt} already written ({old.get('write_s', 0):.0f} s then): reused")
            info.update({"params": old.get("params"), "reused": True})
            write_json(args.result, info)
            return
    import transformers
    cfg = LlamaConfig(hidden_size=DIM, intermediate_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, vocab_size=VOCAB, max_position_embeddings=MAX_POS,
                      rms_norm_eps=1e-5, bos_token_id=BOS, eos_token_id=[EOS, EOT], tie_word_embeddings=False,
                      initializer_range=0.02, **rope_kwargs(LlamaConfig))
    torch.manual_seed(args.seed)
    t1 = time.time()
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg)  # weights made and initialised on the GPU, in bf16
    finally:
        torch.set_default_dtype(prev)
    model = model.to(torch.bfloat16).eval()
    params = sum(p.numel() for p in model.parameters())
    log(f"model built on the GPU in {time.time() - t1:.1f} s: {params / 1e9:.3f} B parameters")
    if os.path.isdir(args.ckpt):  # a stale or half-written folder of ours: only files this script writes
        names = os.listdir(args.ckpt)
        foreign = [f for f in names if not ours(f)]
        if foreign:
            raise SystemExit(f"{args.ckpt} holds files this script did not write ({foreign[:5]}): pick another --ckpt")
        for f in names:
            os.remove(os.path.join(args.ckpt, f))
    os.makedirs(args.ckpt, exist_ok=True)
    t2 = time.time()
    model.save_pretrained(args.ckpt, max_shard_size="5GB")
    write_tokenizer(args.ckpt)
    with open(os.path.join(args.ckpt, "config.json")) as f:
        saved = json.load(f)
    rope = saved.get("rope_parameters") or saved.get("rope_scaling") or {}
    theta = rope.get("rope_theta", saved.get("rope_theta"))
    if rope.get("rope_type") != "llama3" or float(theta or 0) != ROPE_THETA:
        raise SystemExit(f"config.json has rope {rope} / theta {theta}, not llama3 at {ROPE_THETA}")
    shards = sorted(f for f in os.listdir(args.ckpt) if f.endswith(".safetensors"))
    write_s = time.time() - t2
    log(f"saved {len(shards)} shards + tokenizer to {args.ckpt} in {write_s:.1f} s")
    write_json(marker, {"shapes": shapes_key(), "params": params, "write_s": write_s, "shards": shards,
                        "transformers": transformers.__version__, "seed": args.seed})
    info.update({"params": params, "write_s": write_s, "total_s": time.time() - t0, "reused": False})
    write_json(args.result, info)


def ours(name):
    """Files save_pretrained and write_tokenizer put in a checkpoint folder (and the marker)."""
    return name.endswith(".safetensors") or name.endswith(".json") or name.endswith(".json.tmp")


def shapes_key():
    return [DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB, MAX_POS]


def worker_hf(args):
    import torch
    import transformers
    from transformers import LlamaForCausalLM, StoppingCriteria, StoppingCriteriaList
    counts = parse_ints(args.new_tokens)
    t0 = time.time()
    try:
        model = LlamaForCausalLM.from_pretrained(args.ckpt, dtype=torch.bfloat16, attn_implementation="sdpa",
                                                 device_map="cuda")
    except Exception as e:  # noqa: BLE001 - no accelerate, or an older keyword: load on the CPU, then move
        log(f"from_pretrained(device_map='cuda') failed ({type(e).__name__}: {e}); loading on the CPU, then .cuda()")
        try:
            model = LlamaForCausalLM.from_pretrained(args.ckpt, dtype=torch.bfloat16, attn_implementation="sdpa")
        except TypeError:
            model = LlamaForCausalLM.from_pretrained(args.ckpt, torch_dtype=torch.bfloat16, attn_implementation="sdpa")
        model = model.cuda()
    if next(model.parameters()).dtype != torch.bfloat16:
        model = model.to(torch.bfloat16)
    model.eval()
    log(f"HF model loaded in {time.time() - t0:.1f} s (attn {getattr(model.config, '_attn_implementation', '?')})")
    out = {"transformers": transformers.__version__, "torch": torch.__version__, "load_s": time.time() - t0,
           "attn_implementation": getattr(model.config, "_attn_implementation", None), "docs": {}}

    class Stamps(StoppingCriteria):
        """Never stops; synchronises and records the time of every generated token."""

        def __init__(self):
            self.t = []

        def __call__(self, input_ids, scores, **kwargs):
            torch.cuda.synchronize()
            self.t.append(time.perf_counter())
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    def generate(ids, n):
        x = torch.tensor([ids], dtype=torch.long, device="cuda")
        stamps = Stamps()
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.inference_mode():
            y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                               do_sample=False, num_beams=1, pad_token_id=EOS,
                               stopping_criteria=StoppingCriteriaList([stamps]))
        torch.cuda.synchronize()
        end = time.perf_counter()
        got = y.shape[1] - x.shape[1]
        del x, y
        return t, stamps.t, end, got

    docs = [d.split("=", 1) for d in args.doc_files.split(",")]
    warm = read_ids(docs[0][1])[:1024]
    generate(warm, 4)  # kernels, allocator, cuBLAS handles
    log("HF warm-up done")
    nmax = max(counts)
    for name, path in docs:
        ids = read_ids(path)
        log(f"HF generate {name}: {len(ids)} tokens + {nmax}")
        try:
            t, stamps, end, got = generate(ids, nmax)
        except Exception as e:  # noqa: BLE001 - out of memory at 128K must not lose the other documents
            log(f"HF {name} failed: {type(e).__name__}: {str(e)[:300]}")
            out["docs"][name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            write_json(args.result, out)
            torch.cuda.empty_cache()
            continue
        if not stamps:
            log(f"HF {name}: no token timestamps (the stopping criterion never ran)")
            continue
        if got != nmax or len(stamps) != nmax:
            log(f"HF {name}: generated {got} tokens, {len(stamps)} stamps (wanted {nmax})")
        m = hf_marks(t, stamps, counts)
        m.update({"input_tokens": len(ids), "generated": got, "generate_s": end - t,
                  "peak_gib": torch.cuda.max_memory_allocated() / 2 ** 30})
        out["docs"][name] = m
        log(f"HF {name}: prefill {m['prefill_s']:.2f} s, " + ", ".join(
            f"{k} tokens {v['total_s']:.2f} s ({v['decode_ms_per_token']:.1f} ms/token)" for k, v in m["by_n"].items()))
        write_json(args.result, out)  # after every document: a timeout keeps what finished
        torch.cuda.empty_cache()
    write_json(args.result, out)


def read_engine_runs(jsonl, files):
    """{(document, new tokens): stats} from the engine's --stats-json lines; files are (name, tokens, path)."""
    runs = {}
    if not os.path.isfile(jsonl):
        return runs
    with open(jsonl) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            name = next((nm for nm, _, p in files if p == r.get("prompt_ids")), None)
            if name is not None and r.get("output_tokens") == r.get("max_new_tokens"):
                runs[(name, r["max_new_tokens"])] = r
            else:
                log(f"engine line not used (unknown prompt or short output): {line.strip()[:200]}")
    return runs


def read_ids(path):
    with open(path) as f:
        return [int(w) for w in f.read().split()]


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


# ---------------------------------------------------------------- orchestration

def generated_text(line):
    """A line of the engine's generated words ("t123 t9 ..."): long, kept in the log, not echoed."""
    return len(line) > 160 and re.match(r"^(t\d+|<\|[a-z_0-9]+\|>)( |$)", line) is not None


def run_step(name, cmd, timeout_s, logfile):
    """Runs cmd (its own process group) with its output on our stdout and in logfile; returns (rc, seconds),
    rc 124 when it ran past timeout_s (a watchdog stops it even when it prints nothing), 125 when skipped."""
    log(f"{name}: {' '.join(cmd)} (timeout {timeout_s:.0f} s)")
    t = time.time()
    if timeout_s < 5:
        log(f"{name}: skipped, {timeout_s:.0f} s of budget left")
        return 125, 0.0
    timed_out = threading.Event()
    with open(logfile, "w") as lf:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                             start_new_session=True)

        def stop():
            timed_out.set()
            log(f"{name}: out of time after {time.time() - t:.0f} s, stopping it")
            for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
                try:
                    os.killpg(p.pid, sig)
                    p.wait(timeout=wait)
                    return
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue

        watchdog = threading.Timer(timeout_s, stop)
        watchdog.daemon = True
        watchdog.start()
        try:
            for line in p.stdout:
                lf.write(line)
                lf.flush()
                if not generated_text(line):
                    sys.stdout.write(f"  | {line[:300]}\n" if len(line) > 300 else f"  | {line}")
                    sys.stdout.flush()
            rc = p.wait()
        finally:
            watchdog.cancel()
    if timed_out.is_set():
        rc = 124
    log(f"{name}: rc={rc} in {time.time() - t:.0f} s")
    return rc, time.time() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="worker")
    w1 = sub.add_parser("worker-ckpt")
    w1.add_argument("--ckpt", required=True)
    w1.add_argument("--result", required=True)
    w1.add_argument("--seed", type=int, default=0)
    w1.add_argument("--rewrite", action="store_true")
    w2 = sub.add_parser("worker-hf")
    w2.add_argument("--ckpt", required=True)
    w2.add_argument("--doc-files", required=True, help="name=path,name=path")
    w2.add_argument("--new-tokens", required=True)
    w2.add_argument("--result", required=True)
    ap.add_argument("--out", default="/tmp/e2e", help="folder for e2e.json/.csv/.md, logs and document ids")
    ap.add_argument("--ckpt", default="/tmp/longsieve-e2e-llama8b", help="checkpoint folder (reused when complete)")
    ap.add_argument("--engine-ckpt", help="the folder the engine reads instead of --ckpt (HF still reads --ckpt): e.g. "
                    "its FP8 quantization by tools/gpu_host/make_fp8_checkpoint.py --from CKPT (issue 39)")
    ap.add_argument("--rewrite", action="store_true", help="write the checkpoint even when one is there")
    ap.add_argument("--docs", default="32k,128k", help="document lengths: Nk = N*1024-512 tokens, or integers")
    ap.add_argument("--new-tokens", default="64,256")
    ap.add_argument("--policies", default="dense;tsa:keep=0.25", help="engine policies, ';'-separated")
    ap.add_argument("--prefill-chunk", type=int, default=4096)
    ap.add_argument("--bundle", default=os.path.join(REPO, "build", "bundle"))
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--budget-s", type=float, default=500, help="wall-clock budget of the whole run (s)")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--skip-engine", action="store_true")
    args = ap.parse_args()
    if args.worker == "worker-ckpt":
        return worker_ckpt(args)
    if args.worker == "worker-hf":
        return worker_hf(args)

    t_start = time.time()
    left = lambda reserve=10: args.budget_s - (time.time() - t_start) - reserve  # noqa: E731
    docs = parse_docs(args.docs)
    counts = parse_ints(args.new_tokens)
    policies = [p.strip() for p in args.policies.split(";") if p.strip()]
    os.makedirs(args.out, exist_ok=True)
    launcher = os.path.join(args.bundle, "longsieve-gpu")
    if not args.skip_engine and not os.access(launcher, os.X_OK):
        raise SystemExit(f"{launcher}: no engine bundle (build it with tools/bundle/build-bundle.sh), or --skip-engine")
    me = os.path.abspath(__file__)
    py = sys.executable or "python3"
    steps = {}

    # 1. checkpoint + ceiling
    ck_json = os.path.join(args.out, "ckpt.json")
    cmd = [py, "-u", me, "worker-ckpt", "--ckpt", args.ckpt, "--result", ck_json, "--seed", str(args.seed)]
    if args.rewrite:
        cmd.append("--rewrite")
    rc, s = run_step("checkpoint", cmd, min(180, left(60)), os.path.join(args.out, "ckpt.log"))
    steps["checkpoint"] = {"rc": rc, "s": s}
    if rc != 0 or not os.path.isfile(ck_json):
        raise SystemExit("checkpoint step failed: see " + os.path.join(args.out, "ckpt.log"))
    with open(ck_json) as f:
        ck = json.load(f)
    ceiling = ck.get("matmul_tflops")

    # 2. documents
    files = []
    for i, (name, n) in enumerate(docs):
        path = os.path.join(args.out, f"doc-{name}.ids")
        ids = doc_ids(n, args.seed * 1000 + i)
        with open(path, "w") as f:
            f.write(" ".join(map(str, ids)) + "\n")
        files.append((name, n, path))
    log("documents: " + ", ".join(f"{name} {n} tokens" for name, n, _ in files))

    # 3. HF, in its own process (its memory is back before the engine starts)
    hf_json = os.path.join(args.out, "hf.json")
    hf = {}
    if not args.skip_hf:
        if os.path.exists(hf_json):
            os.remove(hf_json)
        engine_reserve = 0 if args.skip_engine else 150 * len(policies)
        cmd = [py, "-u", me, "worker-hf", "--ckpt", args.ckpt, "--doc-files",
               ",".join(f"{name}={path}" for name, _, path in files), "--new-tokens", args.new_tokens, "--result", hf_json]
        rc, s = run_step("hf", cmd, max(60, left(engine_reserve)), os.path.join(args.out, "hf.log"))
        steps["hf"] = {"rc": rc, "s": s}
        if os.path.isfile(hf_json):
            with open(hf_json) as f:
                hf = json.load(f)

    # 4. the engine, one process per policy
    engine_runs = {}
    if not args.skip_engine:
        for i, policy in enumerate(policies):
            jl = os.path.join(args.out, f"engine-{i}.jsonl")
            if os.path.exists(jl):
                os.remove(jl)
            cmd = [launcher, "generate", "--model", args.engine_ckpt or args.ckpt, "--device", "cuda", "--ignore-eos",
                   "--max-new-tokens", ",".join(map(str, counts)), "--prefill-chunk", str(args.prefill_chunk),
                   "--warmup-tokens", "4096", "--policy", policy, "--stats-json", jl]
            for _, _, path in files:
                cmd += ["--prompt-ids", path]
            share = left() / (len(policies) - i)
            rc, s = run_step(f"engine {policy}", cmd, share, os.path.join(args.out, f"engine-{i}.log"))
            steps[f"engine {policy}"] = {"rc": rc, "s": s}
            engine_runs[policy] = read_engine_runs(jl, files)

    # 5. report
    cases, flat = {}, []
    for name, n_tok, _ in files:
        for n in counts:
            rows, floor = rows_for(name, n_tok, n, hf.get("docs", {}).get(name), engine_runs, ceiling)
            cases[(name, n_tok, n)] = (rows, floor)
            flat.extend(rows)
    meta = {"device": ck.get("device"), "torch": ck.get("torch"), "transformers": hf.get("transformers"),
            "ckpt": args.ckpt, "engine_ckpt": args.engine_ckpt or args.ckpt, "params": ck.get("params"), "matmul_tflops": ceiling, "steps": steps,
            "prefill_chunk": args.prefill_chunk, "seed": args.seed, "seconds": time.time() - t_start}
    write_json(os.path.join(args.out, "e2e.json"), {"meta": meta, "rows": flat, "hf": hf})
    keys = ["document", "input_tokens", "new_tokens", "impl", "prefill_s", "decode_ms_per_token", "total_s",
            "out_tokens_per_s", "doc_tokens_per_s", "speedup_vs_hf", "floor_prefill_s", "prefill_over_floor",
            "sparse_layers", "selected_fraction_mean"]
    with open(os.path.join(args.out, "e2e.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in flat:
            w.writerow(r)
    md = markdown(cases, ceiling, meta)
    with open(os.path.join(args.out, "e2e.md"), "w") as f:
        f.write(md + "\n")
    print(md, flush=True)
    log(f"done in {time.time() - t_start:.0f} s: {args.out}/e2e.md, e2e.csv, e2e.json; steps {json.dumps(steps)}")
    failed = [k for k, v in steps.items() if v["rc"] != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main() or 0)
