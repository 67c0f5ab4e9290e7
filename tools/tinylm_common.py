"""Shared helpers for the tiny-checkpoint tools (corpus, tokenizer, model init, goldens).

Used by make_tiny_checkpoints.py (the test fixtures).
Everything is seeded; the checked-in artefacts are the canonical copies (BPE training and
float kernels are deterministic on one machine, but we do not promise bit-identical output
across library versions).

Needs: torch, transformers (4.5x or 5.x), tokenizers, safetensors, numpy.
"""

import copy
import json
import math
import os
import random

import numpy as np

WARNINGS = []


def check(cond, msg):
    """Soft assertion: print and remember a failed check, keep going (one run must produce
    everything; the summary at the end lists what to look at)."""
    if not cond:
        print(f"  WARNING: {msg}")
        WARNINGS.append(msg)
    return bool(cond)

# ----------------------------------------------------------------------------------------------
# Special tokens and chat templates (Llama 3 conventions)
# ----------------------------------------------------------------------------------------------

BOS = "<|begin_of_text|>"
EOT_TEXT = "<|end_of_text|>"
START_HEADER = "<|start_header_id|>"
END_HEADER = "<|end_header_id|>"
EOT_ID = "<|eot_id|>"
SPECIAL_TOKENS = [BOS, EOT_TEXT, START_HEADER, END_HEADER, EOT_ID]

# The pre-tokenizer regex of Meta Llama 3 (tokenizer.json, pre_tokenizer.pretokenizers[0]).
LLAMA3_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Verbatim chat template of Meta-Llama-3-8B-Instruct.
LLAMA3_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

# A Llama 3.1 style template (the tool-calling branches of the real one removed): whitespace
# control, `is defined`, list slicing, `set` in branches, string concatenation with `+`.
LLAMA31_CHAT_TEMPLATE = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] | trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

CHAT_MESSAGES = [
    {"role": "system", "content": "You are brief."},
    {"role": "user", "content": "Summarise: the cat sat."},
]

# ----------------------------------------------------------------------------------------------
# Generated training corpus (no downloads)
# ----------------------------------------------------------------------------------------------

NAMES = ["Alice", "Bob", "Carol", "Dmitri", "Elena", "Farah", "Gustav", "Hiro", "Ines", "Jamal",
         "Kofi", "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tomás",
         "Uma", "Viktor", "Wen", "Yusuf", "Zoë", "François", "Chloé", "Björn", "Renée", "Ana"]
NOUNS = ["cat", "dog", "report", "river", "market", "window", "engine", "garden", "letter", "train",
         "model", "server", "question", "answer", "document", "budget", "bridge", "forest", "song",
         "kitchen", "teacher", "student", "contract", "meeting", "village", "computer", "table",
         "summary", "storm", "harbour", "library", "experiment", "invoice", "ticket", "mountain",
         "table", "database", "network", "customer", "painting", "recipe", "journey", "camera"]
ADJS = ["small", "bright", "quiet", "heavy", "old", "new", "strange", "careful", "red", "green",
        "long", "short", "simple", "complex", "famous", "empty", "warm", "cold", "distant", "local",
        "annual", "quick", "slow", "ancient", "modern", "naïve", "blue", "sparse", "dense"]
VERBS = ["found", "built", "opened", "read", "wrote", "moved", "checked", "painted", "sold", "fixed",
         "closed", "visited", "measured", "signed", "described", "ignored", "carried", "studied",
         "summarised", "cleaned", "tested", "shipped", "counted", "answered", "reviewed"]
PLACES = ["Paris", "London", "Berlin", "Zürich", "São Paulo", "Kraków", "Montréal", "Oslo", "Lagos",
          "Mumbai", "東京", "Québec", "Reykjavík", "Málaga", "Istanbul", "Seoul", "Nairobi", "Lima"]
FOODS = ["café au lait", "crème brûlée", "jalapeño soup", "smørrebrød", "piña colada", "bread",
         "rice", "apple pie", "green tea", "sushi", "pasta", "ramen", "soup"]
GREETINGS = ["Hello", "Good morning", "Hi there", "Welcome back", "Excuse me", "Bonjour", "Hola"]
CONNECTIVES = ["However", "Meanwhile", "In contrast", "Therefore", "Later", "Surprisingly", "Finally",
               "As a result", "Moreover", "At first"]
FUNCS = ["parse", "load", "merge", "count", "score", "split", "encode", "decode", "select", "rank"]


def _sentence(rng):
    """One sentence or short block in one of several styles."""
    style = rng.randrange(12)
    name, name2 = rng.choice(NAMES), rng.choice(NAMES)
    noun, noun2 = rng.choice(NOUNS), rng.choice(NOUNS)
    adj, verb, place = rng.choice(ADJS), rng.choice(VERBS), rng.choice(PLACES)
    if style == 0:
        return f"{name} {verb} the {adj} {noun} near {place}."
    if style == 1:
        y, p = rng.randint(1990, 2031), rng.randint(1, 99)
        a, b = rng.randint(2, 999), rng.randint(1, 999)
        return f"In {y}, revenue rose {p}.{rng.randint(0, 9)}% to ${a}.{rng.randint(0, 99):02d} million, up from ${b} million."
    if style == 2:
        return f"\"{rng.choice(GREETINGS)}, {name2}!\" said {name}. \"Did you see the {adj} {noun}?\""
    if style == 3:
        n = rng.randint(1, 9)
        return f"- Item {n}: {noun} ({rng.randint(1, 500)} units, €{rng.randint(1, 99)},{rng.randint(0, 99):02d})"
    if style == 4:
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        return f"Q: What is {a} + {b}? A: {a + b}."
    if style == 5:
        fn = rng.choice(FUNCS)
        return f"def {fn}_{noun}(x):\n    return x * {rng.randint(2, 64)}  # {adj} {noun2}"
    if style == 6:
        return (f"Summary: the {noun} was {verb} by {name}. Key points: 1) the {adj} {noun2}; "
                f"2) the trip to {place}; 3) {rng.randint(2, 12)} open questions.")
    if style == 7:
        return (f"The café in {place} served a naïve {rng.choice(FOODS)} – 東京 style, "
                f"{rng.randint(7, 12)}:{rng.choice(['00', '15', '30', '45'])}–{rng.randint(13, 23)}:00.")
    if style == 8:
        return (f"Contact {name.lower()}@example.com or visit https://example.org/{noun}/{rng.randint(1, 9999)} "
                f"before {rng.randint(1, 28)}/{rng.randint(1, 12)}/{rng.randint(2020, 2030)}.")
    if style == 9:
        return f"{rng.choice(CONNECTIVES)}, the {adj} {noun} {verb} {rng.randint(2, 40)} {noun2}s in {place}."
    if style == 10:
        return f"## {adj.capitalize()} {noun}s\n\n{name} wrote: \"It's {adj}, isn't it?\" — and {name2} didn't reply."
    return (f"Ta\u0301ble {rng.randint(1, 20)}\t{name}\t{rng.randint(10, 99)}.{rng.randint(0, 9)} kg\t"
            f"{rng.choice(['✓', '✗', '★', '→'])} {rng.choice(FOODS)}")


def make_corpus(seed, n_paragraphs=6000):
    """A list of paragraphs (several sentences each, mixed styles)."""
    rng = random.Random(seed)
    paragraphs = []
    for _ in range(n_paragraphs):
        k = rng.randint(1, 6)
        sep = rng.choice([" ", " ", " ", "\n"])
        paragraphs.append(sep.join(_sentence(rng) for _ in range(k)))
    return paragraphs


def make_paragraph(seed, hf_tokenizer, target_tokens):
    """A paragraph of generated text whose encoding (with BOS) has at least target_tokens tokens."""
    rng = random.Random(seed)
    text = ""
    while len(hf_tokenizer(text)["input_ids"]) < target_tokens:
        text = (text + " " + _sentence(rng)).strip()
    return text


# ----------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------

def train_bpe_tokenizer(corpus, trained_vocab_size):
    """Llama 3 style byte-level BPE: Split(regex)+ByteLevel pre-tokenizer, ByteLevel decoder,
    BOS-adding TemplateProcessing; special tokens appended after the learned vocabulary
    (as in Llama 3, where they sit at 128000+). Returns a tokenizers.Tokenizer."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=trained_vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single=f"{BOS}:0 $A:0",
            pair=f"{BOS}:0 $A:0 {BOS}:1 $B:1",
            special_tokens=[(BOS, bos_id)],
        ),
    ])
    # Llama 3's tokenizer.json sets ignore_merges=true (a whole pre-token found in the vocab is
    # emitted as one token without running merges). Set it through the JSON form, which works
    # on every tokenizers version that knows the field.
    data = json.loads(tok.to_str())
    data["model"]["ignore_merges"] = True
    tok = Tokenizer.from_str(json.dumps(data))
    check(json.loads(tok.to_str())["model"].get("ignore_merges") is True, "ignore_merges not kept")
    return tok


def _hf_tokenizer_class():
    try:
        from transformers import PreTrainedTokenizerFast
        return PreTrainedTokenizerFast
    except ImportError:  # pragma: no cover - transformers 5 keeps the alias, but be safe
        from transformers import TokenizersBackend
        return TokenizersBackend


def save_hf_tokenizer(raw_tokenizer, out_dir, eos_token, chat_template):
    """Save tokenizer.json + tokenizer_config.json via transformers, then normalise the layout:
    the chat template goes into tokenizer_config.json (as in Meta's Llama 3 repos; recent
    transformers writes chat_template.jinja instead), tokenizer_class is PreTrainedTokenizerFast,
    and no add_bos_token/add_eos_token keys (they would make transformers rebuild the
    post-processor). Returns the tokenizer reloaded from disk, and notes about what was changed."""
    cls = _hf_tokenizer_class()
    hf = cls(tokenizer_object=raw_tokenizer, bos_token=BOS, eos_token=eos_token,
             clean_up_tokenization_spaces=False)
    if chat_template is not None:
        hf.chat_template = chat_template
    os.makedirs(out_dir, exist_ok=True)
    hf.save_pretrained(out_dir)

    notes = {"files_written_by_transformers": sorted(os.listdir(out_dir))}
    cfg_path = os.path.join(out_dir, "tokenizer_config.json")
    with open(cfg_path, encoding="utf-8") as f:
        cfg = json.load(f)
    notes["tokenizer_config_as_written"] = {k: v for k, v in cfg.items() if k != "added_tokens_decoder"}
    jinja = os.path.join(out_dir, "chat_template.jinja")
    if os.path.exists(jinja):
        with open(jinja, encoding="utf-8") as f:
            cfg["chat_template"] = f.read()
        os.remove(jinja)
    if chat_template is None:
        cfg.pop("chat_template", None)
    else:
        cfg["chat_template"] = chat_template
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    for k in ("add_bos_token", "add_eos_token"):
        cfg.pop(k, None)
    with open(cfg_path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")
    stm = os.path.join(out_dir, "special_tokens_map.json")
    notes["special_tokens_map_written"] = os.path.exists(stm)

    reloaded = cls.from_pretrained(out_dir)
    if chat_template is not None:
        check(reloaded.chat_template == chat_template, f"{out_dir}: chat template did not survive the round trip")
    else:
        check(not getattr(reloaded, "chat_template", None), f"{out_dir}: unexpected chat template")
    return reloaded, notes


def check_tokenizer_agreement(hf_tok, tokenizer_json_path, texts):
    """transformers and the raw tokenizers library must agree on ids and decoded text."""
    from tokenizers import Tokenizer
    raw = Tokenizer.from_file(tokenizer_json_path)
    for t in texts:
        a = hf_tok(t)["input_ids"]
        b = raw.encode(t).ids
        check(a == b, f"transformers vs tokenizers disagree on {t!r}:\n{a}\n{b}")
        check(a[0] == hf_tok.convert_tokens_to_ids(BOS) and a.count(a[0]) == 1 + t.count(BOS), f"BOS handling {a[:3]}")
        check(raw.decode(b, skip_special_tokens=True) == t, f"decode round trip failed for {t!r}")
    return raw


# ----------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------

def transformers_version_tuple():
    import transformers
    parts = []
    for p in transformers.__version__.split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def dtype_kwarg(torch_dtype):
    """`dtype=` since transformers 4.56, `torch_dtype=` before."""
    return {"dtype": torch_dtype} if transformers_version_tuple() >= (4, 56) else {"torch_dtype": torch_dtype}


def rope_kwargs(config_cls, theta, scaling=None):
    """RoPE settings in whichever form this transformers version takes:
    `rope_parameters` (transformers 5) or `rope_theta` + `rope_scaling` (4.x)."""
    if hasattr(config_cls(), "rope_parameters"):
        params = {"rope_type": (scaling or {}).get("rope_type", "default"), "rope_theta": float(theta)}
        for k, v in (scaling or {}).items():
            if k != "rope_type":
                params[k] = v
        return {"rope_parameters": params}
    kw = {"rope_theta": float(theta)}
    if scaling:
        kw["rope_scaling"] = dict(scaling)
    return kw


def expected_inv_freq(head_dim, theta, scaling=None):
    """Reference RoPE inverse frequencies (default or llama3 scaling), float64."""
    inv = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    regimes = ["none"] * len(inv)
    if scaling and scaling.get("rope_type") == "llama3":
        factor = scaling["factor"]
        lo, hi = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        low_wl, high_wl = old / lo, old / hi
        out = []
        regimes = []
        for f in inv:
            wl = 2 * math.pi / f
            if wl < high_wl:
                out.append(f)
                regimes.append("high_freq_kept")
            elif wl > low_wl:
                out.append(f / factor)
                regimes.append("low_freq_divided")
            else:
                s = (old / wl - lo) / (hi - lo)
                out.append((1 - s) * f / factor + s * f)
                regimes.append("medium_smoothed")
        inv = np.array(out)
    return inv, regimes


def init_weights(model, seed, std, emb_std, bias_std=0.0, norm_jitter=0.1):
    """Deterministic re-initialisation independent of transformers' own init: embedding / lm_head
    ~ N(0, emb_std), other matrices ~ N(0, std), biases ~ N(0, bias_std), RMSNorm weights
    ~ 1 + N(0, norm_jitter) (not all ones, so a loader that forgets the norm weights fails the
    goldens). Tied parameters are visited once.

    Why these scales: with the usual 0.02 (or even 0.08 everywhere) the residual stream stays
    dominated by the current token's embedding, so greedy decoding copies or loops on one token
    (a tied model repeats its input token forever). Layer weights ~0.2 make the output depend on
    the context; embeddings ~0.15 give logits with std ~1 and top1-top2 margins mostly > 1e-3."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if p.ndim == 1 and "norm" in name:
                p.copy_(1.0 + norm_jitter * noise)
            elif name.endswith(".bias"):
                p.copy_(bias_std * noise)
            elif "embed_tokens" in name or "lm_head" in name:
                p.copy_(emb_std * noise)
            else:
                p.copy_(std * noise)


def load_fp32(model_cls, model_dir):
    import torch
    model = model_cls.from_pretrained(model_dir, attn_implementation="eager", **dtype_kwarg(torch.float32))
    model.eval()
    for n, p in model.named_parameters():
        assert p.dtype == torch.float32, f"{n} loaded as {p.dtype}"
    return model


def model_inv_freq(model):
    try:
        return model.model.rotary_emb.inv_freq.detach().double().numpy()
    except AttributeError:
        return None


# ----------------------------------------------------------------------------------------------
# Goldens
# ----------------------------------------------------------------------------------------------

class F32List:
    """A float32 vector to be written with the shortest text that round-trips exactly."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float32).reshape(-1)


def _f32_text(v):
    assert np.isfinite(v), "non-finite value in goldens"
    s = str(v)  # numpy: shortest repr that round-trips through float32
    # Also make parse-as-double-then-round-to-float exact; fall back to the 17-digit double form.
    if np.float32(float(s)) != v:
        s = repr(float(v))
    return s


def write_json(obj, path):
    """json with indent, but numeric lists kept on one line (float32 lists exact)."""
    raws = []

    def conv(o):
        if isinstance(o, F32List):
            raws.append("[" + ", ".join(_f32_text(v) for v in o.values) + "]")
            return f"@@RAW{len(raws) - 1}@@"
        if isinstance(o, dict):
            return {k: conv(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            if o and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in o):
                raws.append(json.dumps(list(o)))
                return f"@@RAW{len(raws) - 1}@@"
            return [conv(x) for x in o]
        return o

    text = json.dumps(conv(obj), indent=2, ensure_ascii=False)
    for i, r in enumerate(raws):
        text = text.replace(f'"@@RAW{i}@@"', r, 1)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.write("\n")


def _margin(logits_row):
    top2 = np.sort(logits_row.astype(np.float64))[-2:]
    return float(top2[1] - top2[0])


def greedy(model, input_ids, n_new, pad_id):
    """Greedy continuation via model.generate (KV cache), never stopping early; cross-checked
    against a full no-cache recompute. Returns dict of ids, per-step logits, margins, checks."""
    import torch
    ids = torch.tensor([input_ids], dtype=torch.long)
    source = "generate"
    gen_ids, step_logits = None, None
    saved_eos = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = None
    try:
        with torch.no_grad():
            out = model.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n_new,
                eos_token_id=None, pad_token_id=pad_id, output_logits=True, return_dict_in_generate=True,
            )
        gen_ids = out.sequences[0, ids.shape[1]:].tolist()
        step_logits = torch.cat([l.float() for l in out.logits], dim=0).numpy()
        if len(gen_ids) != n_new or step_logits.shape[0] != n_new:
            raise RuntimeError(f"generate returned {len(gen_ids)} tokens")
        if [int(r.argmax()) for r in step_logits] != gen_ids:
            raise RuntimeError("generate ids are not the argmax of its raw logits")
    except Exception as e:  # keep going with a plain loop, but say so
        print(f"  WARNING: model.generate path failed ({e!r}); using a manual greedy loop")
        source = "manual_loop"
        gen_ids, rows = [], []
        seq = list(input_ids)
        with torch.no_grad():
            for _ in range(n_new):
                row = model(torch.tensor([seq])).logits[0, -1].float().numpy()
                nxt = int(row.argmax())
                rows.append(row)
                gen_ids.append(nxt)
                seq.append(nxt)
        step_logits = np.stack(rows)
    finally:
        model.generation_config.eos_token_id = saved_eos

    # Full recompute without cache: logits at positions P-1 .. P+n-2 predict the generated tokens.
    full = list(input_ids) + gen_ids
    with torch.no_grad():
        rec = model(torch.tensor([full[:-1]])).logits[0, len(input_ids) - 1:].float().numpy()
    rec_ids = [int(r.argmax()) for r in rec]
    return {
        "ids": gen_ids,
        "margins": [_margin(r) for r in step_logits],
        "source": source,
        "recompute_mismatches": int(sum(a != b for a, b in zip(rec_ids, gen_ids))),
        "cache_vs_recompute_max_abs_diff": float(np.max(np.abs(rec - step_logits))),
    }


def golden_case(model, tok, text, n_new, pad_id, input_ids=None, raw_tok=None):
    import torch
    if input_ids is None:
        input_ids = tok(text)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([input_ids])).logits[0].float().numpy()
    g = greedy(model, input_ids, n_new, pad_id)
    case = {
        "prompt": text,
        "input_ids": list(input_ids),
        "input_tokens": tok.convert_ids_to_tokens(list(input_ids)),
        "n_prompt_tokens": len(input_ids),
        "logits_first": F32List(logits[0]),
        "logits_last": F32List(logits[-1]),
        "argmax_last": int(logits[-1].argmax()),
        "margin_last": _margin(logits[-1]),
        "greedy_ids": g["ids"],
        "greedy_tokens": tok.convert_ids_to_tokens(g["ids"]),
        "greedy_text": tok.decode(g["ids"], skip_special_tokens=False),
        "greedy_margins": F32List(g["margins"]),
        "greedy_min_margin": min(g["margins"]),
        "greedy_source": g["source"],
        "greedy_recompute_mismatches": g["recompute_mismatches"],
        "cache_vs_recompute_max_abs_diff": g["cache_vs_recompute_max_abs_diff"],
    }
    if raw_tok is not None:
        raw_text = raw_tok.decode(g["ids"], skip_special_tokens=False)
        if raw_text != case["greedy_text"]:
            case["greedy_text_tokenizers_lib"] = raw_text
    return case


def file_sizes(d):
    return {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}


def library_versions():
    import safetensors
    import tokenizers
    import torch
    import transformers
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "safetensors": safetensors.__version__,
            "numpy": np.__version__}


def round_up(n, m):
    return (n + m - 1) // m * m


def clone_model(model):
    return copy.deepcopy(model)
