#!/usr/bin/env python3
"""Trains longsieve-needle: a small Llama-architecture model that finds facts in long documents.

One run does everything, on one GPU host (torch, transformers, tokenizers, safetensors):
  1. generates a tokenizer corpus from the suite generator (tools/train/suite.py) and trains a
     byte-level BPE tokenizer (Llama 3 split regex, vocab --vocab including special tokens);
  2. trains a Llama model (GQA, RoPE, RMSNorm, SwiGLU) in plain PyTorch on generated RULER-style
     documents rendered with the model's own chat template; loss = mean CE over answer tokens +
     0.5 x mean CE over the prompt tokens (training haystacks repeat 20% of their sentences, so
     that the prompt loss rewards copying; 60% of needles and questions are composed from parts,
     PROCEDURAL, so that no phrasing can be memorised, and with the same share a haystack is
     procedural: training-only kinds, mixed segments, layout noise, suite.hay_plan); bf16 autocast, AdamW, warm-up + cosine; length
     curriculum 512 -> 1024 -> 2048 tokens; the step count is fixed from a short speed probe so
     the run fits --train-seconds (or given with --steps), with a hard wall-clock stop;
  3. exports a Hugging Face checkpoint (bf16 safetensors, config, generation config, tokenizer,
     tokenizer_config with the chat template), checks that transformers loads it and reproduces
     this script's logits and that apply_chat_template renders the training strings, writes
     goldens.json (fp32 CPU eager transformers logits and greedy ids) for the Java parity test;
  4. measures greedy accuracy per task at 1x, 2x, 4x and 8x the training length (dense attention).

    python3 tools/train/train_needle.py --out /tmp/needle --train-seconds 330
"""

import argparse
import json
import math
import os
import random
import sys
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chat_format as CF  # noqa: E402
import suite as S  # noqa: E402
import train_loop  # noqa: E402

T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


# ---------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def tokenizer_corpus(st, seed, n_items):
    gen = S.Generator(st, procedural=PROCEDURAL)  # the tokenizer sees the composed phrasings it will train on
    rng = random.Random(seed)
    out = []
    for i in range(n_items):
        kind = S.pick_kind(rng)
        it = gen.make(kind, seed * 100000 + i, rng.randint(200, 2000))
        out.append(CF.render_prompt(S.user_message(st, it)) + it["reference"] + CF.END)
    return out


def train_tokenizer(corpus, vocab_total):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_total - len(CF.SPECIAL_TOKENS), min_frequency=2,
                                  show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in CF.SPECIAL_TOKENS])
    bos = tok.token_to_id(CF.BOS)
    # raw prompts (add_special_tokens=True) get <s>; chat prompts carry it from the template
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=f"{CF.BOS}:0 $A:0", pair=f"{CF.BOS}:0 $A:0 {CF.BOS}:1 $B:1",
                                      special_tokens=[(CF.BOS, bos)]),
    ])
    return tok


# ---------------------------------------------------------------------------------------------
# Model (state_dict keys are Hugging Face LlamaForCausalLM's)
# ---------------------------------------------------------------------------------------------

def build_model_classes():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))
            self.eps = eps

        def forward(self, x):
            dt = x.dtype
            x = x.float()
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * x.to(dt)

    class Attn(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.h, self.kv, self.hd = c["heads"], c["kv_heads"], c["head_dim"]
            self.q_proj = nn.Linear(c["dim"], self.h * self.hd, bias=False)
            self.k_proj = nn.Linear(c["dim"], self.kv * self.hd, bias=False)
            self.v_proj = nn.Linear(c["dim"], self.kv * self.hd, bias=False)
            self.o_proj = nn.Linear(self.h * self.hd, c["dim"], bias=False)

    class Mlp(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.gate_proj = nn.Linear(c["dim"], c["hidden"], bias=False)
            self.up_proj = nn.Linear(c["dim"], c["hidden"], bias=False)
            self.down_proj = nn.Linear(c["hidden"], c["dim"], bias=False)

    class Layer(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.self_attn = Attn(c)
            self.mlp = Mlp(c)
            self.input_layernorm = RMSNorm(c["dim"], c["eps"])
            self.post_attention_layernorm = RMSNorm(c["dim"], c["eps"])

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    class Llama(nn.Module):
        """Llama decoder; forward(ids, cache=None, pos0=0) -> logits (B, T, V). A cache is a list of
        per-layer [k, v] (B, kv_heads, T, head_dim) after RoPE, extended in place."""

        def __init__(self, c):
            super().__init__()
            self.c = c
            self.model = nn.Module()
            self.model.embed_tokens = nn.Embedding(c["vocab"], c["dim"])
            self.model.layers = nn.ModuleList([Layer(c) for _ in range(c["layers"])])
            self.model.norm = RMSNorm(c["dim"], c["eps"])
            self.lm_head = nn.Linear(c["dim"], c["vocab"], bias=False)
            hd = c["head_dim"]
            inv = 1.0 / (c["theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
            self.register_buffer("inv_freq", inv.float(), persistent=False)

        def rope(self, t0, t, device):
            pos = torch.arange(t0, t0 + t, device=device, dtype=torch.float32)
            f = torch.outer(pos, self.inv_freq.to(device))
            emb = torch.cat((f, f), dim=-1)
            return emb.cos(), emb.sin()  # (T, head_dim) f32

        def forward(self, ids, cache=None, pos0=0):
            B, T = ids.shape
            c = self.c
            x = self.model.embed_tokens(ids)
            cos, sin = self.rope(pos0, T, ids.device)
            rep = c["heads"] // c["kv_heads"]
            for li, layer in enumerate(self.model.layers):
                a = layer.self_attn
                h = layer.input_layernorm(x)
                q = a.q_proj(h).view(B, T, a.h, a.hd).transpose(1, 2)
                k = a.k_proj(h).view(B, T, a.kv, a.hd).transpose(1, 2)
                v = a.v_proj(h).view(B, T, a.kv, a.hd).transpose(1, 2)
                q = (q * cos.to(q.dtype) + rotate_half(q) * sin.to(q.dtype))
                k = (k * cos.to(k.dtype) + rotate_half(k) * sin.to(k.dtype))
                if cache is not None:
                    if len(cache) <= li:
                        cache.append([k, v])
                    else:
                        cache[li][0] = torch.cat([cache[li][0], k], dim=2)
                        cache[li][1] = torch.cat([cache[li][1], v], dim=2)
                    k, v = cache[li]
                kk = k.repeat_interleave(rep, dim=1)
                vv = v.repeat_interleave(rep, dim=1)
                causal = T > 1
                if cache is not None and pos0 > 0 and T > 1:
                    raise ValueError("chunked prefill is not supported")
                o = F.scaled_dot_product_attention(q, kk, vv, is_causal=causal)
                x = x + a.o_proj(o.transpose(1, 2).reshape(B, T, a.h * a.hd))
                h = layer.post_attention_layernorm(x)
                m = layer.mlp
                x = x + m.down_proj(F.silu(m.gate_proj(h)) * m.up_proj(h))
            return self.lm_head(self.model.norm(x))

    return Llama


def init_weights(model, seed, n_layers):
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                p.fill_(1.0)
            else:
                std = 0.02 / math.sqrt(2 * n_layers) if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                p.copy_(torch.randn(p.shape, generator=g) * std)


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

ANSWER_BUDGET = {"summary": 90, "vt": 40, "niah_multiquery": 60, "niah_multivalue": 50, "mdqa": 40}
REPEAT = 0.2  # training haystacks: chance that a sentence repeats an earlier one
# training documents: chance that a needle or question is composed from parts (suite.compose_needle,
# compose_question) rather than one of the family's templates; run 3 memorised those templates (#19).
# With the same share (drawn apart) a haystack is procedural (suite.hay_plan: 9 training-only kinds,
# segments of 2-4 kinds, layout noise): run 4's held-out failures sat in unseen haystack kinds.
# Training data only: the evaluation Generators keep the default 0.
PROCEDURAL = 0.6
PAD_CODE, CTX_CODE, ANS_CODE = 0, 1, 2


def seq_len_for(step, total, max_len):
    """Length curriculum by training progress; a hash of the step mixes the lengths."""
    p = step / max(1, total)
    r = random.Random(step * 2654435761 % (2 ** 32)).random()
    if p < 0.08:
        return max_len // 8
    if p < 0.16:
        return max_len // 4
    if p < 0.3:
        return max_len // 2 if r < 0.7 else max_len // 4
    if r < 0.1:
        return max_len // 4
    if r < 0.3:
        return max_len // 2
    return max_len


class RowMaker:
    """Token rows for training: prompt ids + answer ids + <|end|>, with a code per token. batch_at(b)
    depends on (seed, b) alone, so a resumed run (train_loop) sees the batches the uninterrupted one would."""

    def __init__(self, st, tok_json, seed, tokenizer=None):
        if tokenizer is None:
            from tokenizers import Tokenizer
            tokenizer = Tokenizer.from_str(tok_json)
        self.st = st
        self.tok = tokenizer
        self.end = self.tok.token_to_id(CF.END)
        self.pad = self.tok.token_to_id(CF.PAD)
        self.gen = S.Generator(st, count_tokens=lambda t: len(self.tok.encode(t, add_special_tokens=False).ids) + 6,
                               repeat=REPEAT, procedural=PROCEDURAL)
        self.rng = random.Random(seed)
        self.seed = seed
        self.n = 0

    def row(self, L):
        import numpy as np
        while True:
            self.n += 1
            kind = S.pick_kind(self.rng)
            budget = ANSWER_BUDGET.get(kind, 30)
            # lengths skewed towards the row length (less padding), down to 40% of it
            target = int(L - budget - (0.6 * L - budget) * self.rng.random() ** 2)
            it = self.gen.make(kind, self.seed * 10_000_000 + self.n, target)
            p = self.tok.encode(CF.render_prompt(S.user_message(self.st, it)), add_special_tokens=False).ids
            a = self.tok.encode(it["reference"], add_special_tokens=False).ids + [self.end]
            if len(p) + len(a) > L:
                continue
            ids = np.full(L, self.pad, dtype=np.int64)
            code = np.zeros(L, dtype=np.int8)
            ids[:len(p)] = p
            ids[len(p):len(p) + len(a)] = a
            code[:len(p)] = CTX_CODE
            code[len(p):len(p) + len(a)] = ANS_CODE
            return ids, code

    def batch(self, L, tokens_per_step):
        import numpy as np
        rows = [self.row(L) for _ in range(max(1, tokens_per_step // L))]
        return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])

    def batch_at(self, b, L, tokens_per_step):
        """Training batch b: its own random stream and document seeds, whatever came before."""
        self.rng = random.Random(self.seed * 1_000_003 + b)
        self.n = b * 100_000  # document seeds seed * 10^7 + n: no two batches share one
        return self.batch(L, tokens_per_step)


def make_loader(st, tok_json, seed, total_steps, max_len, tokens_per_step, workers, start=0, tokenizer=None):
    """Batches start, start + 1, ...: worker w makes start + w, start + w + workers, ..., and the
    DataLoader takes them from its workers in turn, so the order is the batch order."""
    import torch
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    class Batches(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            wid, n = (info.id, info.num_workers) if info else (0, 1)
            maker = RowMaker(st, tok_json, seed, tokenizer)
            b = start + wid
            while True:
                ids, code = maker.batch_at(b, seq_len_for(b, total_steps, max_len), tokens_per_step)
                yield torch.from_numpy(ids), torch.from_numpy(code)
                b += n

    more = {"prefetch_factor": 6} if workers else {}  # torch before 2.0 refuses the option without workers
    return DataLoader(Batches(), batch_size=None, num_workers=workers, pin_memory=torch.cuda.is_available(),
                      persistent_workers=False, **more)


def loss_fn(logits, ids, code, ctx_weight):
    import torch.nn.functional as F
    lg = logits[:, :-1].float()
    tgt = ids[:, 1:]
    c = code[:, 1:]
    ce = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), tgt.reshape(-1), reduction="none").view_as(tgt)
    ans = (c == ANS_CODE).float()
    ctx = (c == CTX_CODE).float()
    # per-row mean over answer tokens, then mean over rows: a 50-token summary weighs as much as a
    # 3-token number
    n_ans = ans.sum(1)
    has = (n_ans > 0).float()
    l_ans = (((ce * ans).sum(1) / n_ans.clamp(min=1)) * has).sum() / has.sum().clamp(min=1)
    l_ctx = (ce * ctx).sum() / ctx.sum().clamp(min=1)
    return l_ans + ctx_weight * l_ctx, l_ans, l_ctx


# ---------------------------------------------------------------------------------------------
# Export and checks
# ---------------------------------------------------------------------------------------------

def hf_tokenizer_class():
    try:
        from transformers import PreTrainedTokenizerFast
        return PreTrainedTokenizerFast
    except ImportError:  # transformers 5 keeps the alias, but be safe
        from transformers import TokenizersBackend
        return TokenizersBackend


def export(model, mc, tok, out_dir, meta):
    import torch
    from safetensors.torch import save_file
    from transformers import GenerationConfig, LlamaConfig
    PreTrainedTokenizerFast = hf_tokenizer_class()
    os.makedirs(out_dir, exist_ok=True)
    bos, end, pad = (tok.token_to_id(t) for t in (CF.BOS, CF.END, CF.PAD))
    rope = ({"rope_parameters": {"rope_type": "default", "rope_theta": float(mc["theta"])}}
            if hasattr(LlamaConfig(), "rope_parameters") else {"rope_theta": float(mc["theta"])})
    cfg = LlamaConfig(vocab_size=mc["vocab"], hidden_size=mc["dim"], intermediate_size=mc["hidden"],
                      num_hidden_layers=mc["layers"], num_attention_heads=mc["heads"],
                      num_key_value_heads=mc["kv_heads"], head_dim=mc["head_dim"],
                      max_position_embeddings=mc["max_positions"], rms_norm_eps=mc["eps"],
                      tie_word_embeddings=False, bos_token_id=bos, eos_token_id=end, pad_token_id=pad,
                      hidden_act="silu", attention_bias=False, mlp_bias=False, **rope)
    cfg.architectures = ["LlamaForCausalLM"]
    cfg.save_pretrained(out_dir)
    with open(os.path.join(out_dir, "config.json")) as f:
        cj = json.load(f)
    cj["rope_theta"] = float(mc["theta"])  # both spellings: older readers look for rope_theta
    cj["dtype"] = "bfloat16"
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cj, f, indent=2, sort_keys=True)
        f.write("\n")
    GenerationConfig(bos_token_id=bos, eos_token_id=end, pad_token_id=pad, do_sample=False,
                     max_new_tokens=128).save_pretrained(out_dir)
    state = {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=CF.BOS, eos_token=CF.END, pad_token=CF.PAD,
                                 clean_up_tokenization_spaces=False)
    hf.chat_template = CF.CHAT_TEMPLATE
    hf.save_pretrained(out_dir)
    # normalise: template inside tokenizer_config.json, no add_bos/eos keys, class named plainly
    p = os.path.join(out_dir, "tokenizer_config.json")
    with open(p, encoding="utf-8") as f:
        tc = json.load(f)
    jinja = os.path.join(out_dir, "chat_template.jinja")
    if os.path.exists(jinja):
        os.remove(jinja)
    tc["chat_template"] = CF.CHAT_TEMPLATE
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc["model_max_length"] = mc["max_positions"]
    for k in ("add_bos_token", "add_eos_token"):
        tc.pop(k, None)
    with open(p, "w", encoding="utf-8") as f:
        json.dump(tc, f, indent=2, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(out_dir, "training_meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


def f32list(a):
    import numpy as np
    out = []
    for v in np.asarray(a, dtype=np.float32).reshape(-1):
        s = str(v)
        if np.float32(float(s)) != v:
            s = repr(float(v))
        out.append(s)
    return "[" + ", ".join(out) + "]"


def margin(row):
    import numpy as np
    t = np.sort(row.astype(np.float64))[-2:]
    return float(t[1] - t[0])


def verify_and_goldens(out_dir, Llama, mc, st, checks, n_new=32):
    """transformers loads the export; its fp32 logits match this script's model on the same bf16
    weights; apply_chat_template renders the training string; goldens.json for the Java test."""
    import numpy as np
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM
    PreTrainedTokenizerFast = hf_tokenizer_class()
    hf_tok = PreTrainedTokenizerFast.from_pretrained(out_dir)
    hfm = LlamaForCausalLM.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager").eval()
    mine = Llama(mc).eval()
    mine.load_state_dict({k: v.float() for k, v in load_file(os.path.join(out_dir, "model.safetensors")).items()})
    gen = S.Generator(st, count_tokens=lambda t: len(hf_tok(t, add_special_tokens=False)["input_ids"]) + 6)
    items = [gen.make("niah_single", 424242, 300, depth=0.4, doc_id="golden-needle"),
             gen.make("mdqa", 434343, 600, depth=0.7, doc_id="golden-mdqa")]
    cases = []
    for it in items:
        user = S.user_message(st, it)
        rendered = hf_tok.apply_chat_template([{"role": "user", "content": user}], tokenize=False,
                                              add_generation_prompt=True)
        checks["chat_template_matches_training_" + it["doc_id"]] = rendered == CF.render_prompt(user)
        ids = hf_tok(rendered, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            t = torch.tensor([ids])
            a = hfm(t).logits[0].float().numpy()
            b = mine(t)[0].float().numpy()
        diff = float(np.max(np.abs(a - b)))
        checks["max_abs_logit_diff_transformers_vs_training_code_" + it["doc_id"]] = diff
        seq, margins, gids = list(ids), [], []
        with torch.no_grad():
            for _ in range(n_new):  # no-cache greedy: the plainest reference
                row = hfm(torch.tensor([seq])).logits[0, -1].float().numpy()
                nxt = int(row.argmax())
                gids.append(nxt)
                margins.append(margin(row))
                seq.append(nxt)
        cases.append({"id": it["doc_id"], "item": it, "user_message": user, "chat_prompt": rendered,
                      "input_ids": ids, "n_prompt_tokens": len(ids), "logits_last": "@F32_%d@" % len(cases),
                      "argmax_last": int(a[-1].argmax()), "margin_last": margin(a[-1]),
                      "greedy_ids": gids, "greedy_text": hf_tok.decode(gids, skip_special_tokens=False),
                      "greedy_margins": margins, "greedy_min_margin": min(margins)})
        cases[-1]["_last"] = a[-1]
    raws = [c.pop("_last") for c in cases]
    gold = {"model": os.path.basename(out_dir.rstrip("/")), "generated_by": "tools/train/train_needle.py",
            "settings": {"device": "cpu", "compute_dtype": "float32 (bf16 weights upcast)",
                         "attn_implementation": "eager", "max_new_tokens": n_new, "stops_at_eos": False},
            "eos_token_id": hf_tok.convert_tokens_to_ids(CF.END), "cases": cases}
    text = json.dumps(gold, indent=1, ensure_ascii=False)
    for i, r in enumerate(raws):
        text = text.replace('"@F32_%d@"' % i, f32list(r))
    with open(os.path.join(out_dir, "goldens.json"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    return cases


def greedy_cached(model, ids, max_new, end_id, device):
    import torch
    cache = []
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
        logits = model(torch.tensor([ids], device=device), cache=cache, pos0=0)
        out, pos = [], len(ids)
        nxt = int(logits[0, -1].argmax())
        for _ in range(max_new):
            if nxt == end_id:
                break
            out.append(nxt)
            logits = model(torch.tensor([[nxt]], device=device), cache=cache, pos0=pos)
            pos += 1
            nxt = int(logits[0, -1].argmax())
    return out


def eval_families(text_path):
    """[(family, SuiteText)]: the training family, and the held-out family when its file is there
    (suite.held_out_path: next to the training text file; training never reads it)."""
    fams = [("train", S.SuiteText(text_path))]
    path = S.held_out_path(text_path)
    if os.path.exists(path):
        fams.append(("heldout", S.SuiteText(text_path, held_out=path)))
    else:
        log(f"no held-out family at {path}: evaluating the training family only")
    return fams


def evaluate(model, tok, families, seq, device, per_cell, deadline, seed=777):
    """Greedy dense accuracy per family x kind x length multiple: {family: {"kind@Mx": {accuracy, n}}}.
    Length-major, so that a deadline cuts the longest documents of both families alike."""
    end_id = tok.token_to_id(CF.END)
    count = lambda t: len(tok.encode(t, add_special_tokens=False).ids) + 6  # noqa: E731
    gens = [(name, st, S.Generator(st, count_tokens=count)) for name, st in families]
    res = {name: {} for name, _ in families}
    for mult in (1, 2, 4, 8):
        for name, st, gen in gens:
            for kind in S.KINDS:
                scores = []
                for i in range(per_cell):
                    if time.time() > deadline:
                        break
                    depth = (i + 0.5) / per_cell
                    it = gen.make(kind, seed + 1000 * mult + i, seq * mult - ANSWER_BUDGET.get(kind, 30), depth=depth)
                    ids = tok.encode(CF.render_prompt(S.user_message(st, it)), add_special_tokens=False).ids
                    out = tok.decode(greedy_cached(model, ids, 120 if kind == "summary" else 64, end_id, device))
                    scores.append(S.score(kind, it["expected"], out, it["reference"]))
                    if i == 0 and mult <= 2:
                        log(f"  eval {name} {kind} x{mult} ({it['haystack']}): expected {it['reference']!r} got {out!r}")
                if scores:
                    res[name][f"{kind}@{mult}x"] = {"accuracy": sum(scores) / len(scores), "n": len(scores)}
    return res


# ---------------------------------------------------------------------------------------------
# Run set-up: model shape, tokenizer, speed probe, resume
# ---------------------------------------------------------------------------------------------

MODEL_SHAPE = {"dim": 256, "hidden": 768, "layers": 6, "heads": 4, "kv_heads": 2, "head_dim": 64}
# the envelope of the bundled model (issue 19): it travels to the GPU host with the repository
MAX_MODEL_BYTES = 20_000_000
# what fixes a run's model, data and schedule: a resumed run takes these from its checkpoint
TRAINING_ARGS = ("text", "seed", "train_seconds", "steps", "seq", "tokens_per_step", "vocab", "lr", "ctx_weight",
                 "tokenizer_items", "device", *MODEL_SHAPE)


def param_count(mc):
    d, q, kv = mc["dim"], mc["heads"] * mc["head_dim"], mc["kv_heads"] * mc["head_dim"]
    layer = d * q + 2 * d * kv + q * d + 3 * d * mc["hidden"] + 2 * d
    return 2 * mc["vocab"] * d + mc["layers"] * layer + d


def model_config(args):
    """The model's shape from the flags, held to the bundled model's envelope: GQA with at least 2 query heads
    per KV head, head_dim 64 or 128, at least 6 layers, at most MAX_MODEL_BYTES in bf16."""
    mc = {"vocab": args.vocab, **{k: getattr(args, k) for k in MODEL_SHAPE}, "eps": 1e-5, "theta": 10000.0,
          "max_positions": 32768}
    problems = []
    if mc["heads"] % mc["kv_heads"] or mc["heads"] < 2 * mc["kv_heads"]:
        problems.append(f"--heads {mc['heads']} must be a multiple of --kv-heads {mc['kv_heads']}, at least twice it")
    if mc["head_dim"] not in (64, 128):
        problems.append(f"--head-dim {mc['head_dim']} is not 64 or 128")
    if mc["layers"] < 6:
        problems.append(f"--layers {mc['layers']} is under 6")
    if 2 * param_count(mc) > MAX_MODEL_BYTES:
        problems.append(f"{param_count(mc) / 1e6:.2f}M parameters are {2 * param_count(mc) / 1e6:.1f} MB in bf16, "
                        f"over {MAX_MODEL_BYTES / 1e6:.0f} MB")
    if problems:
        sys.exit("train_needle.py: " + "; ".join(problems))
    return mc


def tokenizer_for(st, args):
    """A byte-level BPE trained on the training family's documents: (its JSON, the tokenizer)."""
    corpus = tokenizer_corpus(st, args.seed, args.tokenizer_items)
    log(f"tokenizer corpus: {len(corpus)} docs, {sum(map(len, corpus))} chars")
    tok = train_tokenizer(corpus, args.vocab)
    ids_sample = tok.encode(corpus[0], add_special_tokens=False).ids
    log(f"tokenizer: {tok.get_vocab_size(with_added_tokens=True)} tokens; "
        f"{len(corpus[0]) / len(ids_sample):.2f} chars/token")
    return tok.to_str(), tok


def probe_speed(Llama, mc, st, tok_json, args, device):
    """Seconds per step of the GPU (a throw-away model at full length) and of the data workers, and the
    step count that fits --train-seconds (or --steps): (gpu_s, data_s, total)."""
    import numpy as np
    import torch
    probe = Llama(mc).to(device)
    popt = torch.optim.AdamW(probe.parameters(), lr=1e-4, fused=device == "cuda")
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    B = args.tokens_per_step // args.seq
    x = torch.randint(0, mc["vocab"], (B, args.seq), device=device)
    c = torch.ones_like(x, dtype=torch.int8)
    times = []
    for _ in range(8):
        sync()
        t = time.time()
        with torch.autocast(device, dtype=torch.bfloat16):
            loss, _, _ = loss_fn(probe(x), x, c, args.ctx_weight)
        loss.backward()
        popt.step()
        popt.zero_grad(set_to_none=True)
        sync()
        times.append(time.time() - t)
    gpu_step = float(np.median(times[3:]))
    del probe, popt, x, c
    if device == "cuda":
        torch.cuda.empty_cache()
    # data speed: one process making a full-length batch
    rm = RowMaker(st, tok_json, 999)
    t = time.time()
    rm.batch(args.seq, args.tokens_per_step // 4)
    data_step = (time.time() - t) * 4 / max(1, args.workers) * 1.15
    total = args.steps or int(args.train_seconds / (max(gpu_step, data_step) * 1.04))
    log(f"probe: gpu {gpu_step * 1000:.1f} ms/step, data {data_step * 1000:.1f} ms/step with {args.workers} workers "
        f"-> {total} steps")
    return gpu_step, data_step, total


def resume_args(ap, args):
    """Loads --resume's checkpoint and takes its training settings into args. A setting given on the command line
    that differs from the checkpoint's is refused: the run would no longer be the one that was started."""
    ck = train_loop.load_checkpoint(args.resume)
    saved = ck["extra"]["args"]
    for k in TRAINING_ARGS:
        given = getattr(args, k)
        if given != ap.get_default(k) and given != saved[k]:
            ap.error(f"--{k.replace('_', '-')} {given} differs from the checkpoint's {saved[k]}")
        setattr(args, k, saved[k])
    return ck


# ---------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="longsieve-needle-7m")
    ap.add_argument("--text", default=S.DEFAULT_TEXT)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--train-seconds", type=float, default=330)
    ap.add_argument("--steps", type=int, default=0, help="fixed step count (0: from the speed probe)")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--tokens-per-step", type=int, default=65536)
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--ctx-weight", type=float, default=0.5)
    ap.add_argument("--eval-per-cell", type=int, default=6)
    ap.add_argument("--deadline-seconds", type=float, default=500, help="stop evaluating after this much wall time")
    ap.add_argument("--tokenizer-items", type=int, default=1500)
    for flag, default in MODEL_SHAPE.items():
        ap.add_argument("--" + flag.replace("_", "-"), type=int, default=default, help="model shape")
    ap.add_argument("--checkpoint", default=None,
                    help="with --stop-after-seconds: where to leave the checkpoint (default OUT/checkpoint.pt)")
    ap.add_argument("--stop-after-seconds", type=float, default=0,
                    help="stop training once this process has run this long, write the checkpoint and exit "
                         f"{train_loop.EXIT_CHECKPOINTED}; 0: train to the end")
    ap.add_argument("--resume", default=None, help="continue the run of this checkpoint (its settings win)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                    help="cpu: a smoke run of the whole pipeline with a few --steps (no model worth keeping)")
    args = ap.parse_args()
    ck = resume_args(ap, args) if args.resume else None

    import numpy as np
    import torch
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    device = args.device
    torch.backends.cuda.matmul.allow_tf32 = True
    out_dir = os.path.join(args.out, args.name)
    os.makedirs(out_dir, exist_ok=True)
    st = S.SuiteText(args.text)
    device_name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    log("torch", torch.__version__, device_name)

    mc = model_config(args)
    Llama = build_model_classes()
    if ck is not None:
        from tokenizers import Tokenizer
        tok_json = ck["extra"]["tok_json"]
        tok = Tokenizer.from_str(tok_json)
        gpu_step, data_step = ck["extra"]["probe_s"]
        state = ck["state"]
        log(f"resuming {args.resume} at step {state.step} of {state.total} ({state.elapsed:.1f}s trained)")
    else:
        tok_json, tok = tokenizer_for(st, args)
        gpu_step, data_step, total = probe_speed(Llama, mc, st, tok_json, args, device)
        state = train_loop.TrainState(total, args.lr)
    assert tok.get_vocab_size(with_added_tokens=True) <= mc["vocab"]
    state.commands.append(" ".join(sys.argv))

    torch.manual_seed(args.seed)
    model = Llama(mc).to(device)
    init_weights(model, args.seed, mc["layers"])
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.2f}M parameters")
    decay = [p for n, p in model.named_parameters() if p.ndim == 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=device == "cuda")
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        del ck

    def loss_step(m, ids, code):
        with torch.autocast(device, dtype=torch.bfloat16):
            return loss_fn(m(ids), ids, code, args.ctx_weight)

    loader = make_loader(st, tok_json, args.seed, state.total, args.seq, args.tokens_per_step, args.workers,
                         start=state.step)
    deadline = T0 + args.stop_after_seconds if args.stop_after_seconds > 0 else None
    reason = train_loop.train(model, opt, iter(loader), state, loss_step, device, deadline=deadline,
                              hard_stop_seconds=args.train_seconds * 1.15, log=log)
    del loader
    if reason == "deadline":
        path = args.checkpoint or os.path.join(args.out, "checkpoint.pt")
        extra = {"tok_json": tok_json, "args": {k: getattr(args, k) for k in TRAINING_ARGS},
                 "probe_s": [gpu_step, data_step]}
        train_loop.save_checkpoint(path, model, opt, state, extra)
        log(f"checkpoint {path} ({os.path.getsize(path) / 1e6:.1f} MB): resume with --resume {path}")
        sys.exit(train_loop.EXIT_CHECKPOINTED)
    step, wait, ema, hist, train_time = state.step, state.wait, state.ema, state.hist, state.elapsed
    log(f"trained {step} steps in {train_time:.1f}s (data wait {wait:.1f}s, {state.processes} process(es))")

    meta = {"seed": args.seed, "steps": step, "planned_steps": state.total, "train_seconds": train_time,
            "training_processes": state.processes,
            "data_wait_seconds": wait, "final_answer_loss": hist[-1]["answer_loss"] if hist else None,
            "final_answer_loss_ema": ema, "final_context_loss": hist[-1]["context_loss"] if hist else None,
            "params": n_params, "model": mc, "args": vars(args), "tokens_per_step": args.tokens_per_step,
            "probe_ms": {"gpu": gpu_step * 1000, "data": data_step * 1000}, "torch": torch.__version__,
            "device": device_name, "history": hist, "command": state.commands[0],
            "resume_commands": state.commands[1:],
            "repeat": REPEAT, "procedural": PROCEDURAL, "procedural_parts": S.procedural_parts(),
            "haystack_kinds": {k: len(h["templates"]) for k, h in st.haystack.items()},
            "procedural_haystack_kinds": {k: len(h["templates"]) for k, h in S.PROC_HAY.items()},
            "needle_phrasings": len(st.needles["kv"]), "vt_phrasings": len(st.needles["vt"]),
            "summary_markers": len(st.needles["summary"]),
            "question_phrasings": {k: len(v) for k, v in st.questions.items()}, "mix": S.training_mix()}
    model.eval()
    export(model, mc, tok, out_dir, meta)
    log("exported", sorted(os.listdir(out_dir)))

    checks = {}
    try:
        verify_and_goldens(out_dir, Llama, mc, st, checks)
    except Exception as e:  # keep the model and the rest of the results
        import traceback
        traceback.print_exc()
        checks["verify_error"] = repr(e)
    log("checks", json.dumps(checks))
    # evaluate the exported bf16 weights
    from safetensors.torch import load_file
    model.load_state_dict({k: v.float() for k, v in load_file(os.path.join(out_dir, "model.safetensors")).items()})
    res = evaluate(model, tok, eval_families(args.text), args.seq, device, args.eval_per_cell,
                   T0 + args.deadline_seconds)
    for fam, cells in res.items():
        for k, v in cells.items():
            log(f"  {fam} {k}: {v['accuracy']:.3f} (n={v['n']})")
    meta["checks"] = checks
    meta["dense_eval_gpu"] = res["train"]
    meta["dense_eval_gpu_heldout"] = res.get("heldout", {})
    with open(os.path.join(out_dir, "training_meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    log("done")


if __name__ == "__main__":
    main()
