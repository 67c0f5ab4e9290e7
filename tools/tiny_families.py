"""The model families of issue 34 as tiny random checkpoints, and the families' chat templates.

Used by make_tiny_checkpoints.py (`--only` names which fixtures to write). Every fixture shares the
one byte-level BPE tokenizer of the older fixtures; dims are tiny (hidden 32, tied embeddings) so a
fixture stays a few hundred KB. Each exercises what its family adds:

  qwen3-yarn      Qwen3ForCausalLM: per-head q/k RMSNorm, head_dim 16 (not hidden / heads), YaRN
                  factor 4 over an original window of 64 with max_position_embeddings 80 (the
                  explicit factor wins, as in Qwen3's published 128K recipe), prompts to 160 tokens
  phi3-longrope   Phi3ForCausalLM as Phi-4-mini: fused qkv_proj / gate_up_proj, partial_rotary_factor
                  0.75, LongRoPE short/long factors over an original window of 64, a prompt that
                  crosses the window while generating and one that starts beyond it
  gemma3-text     Gemma3ForCausalLM: sliding (window 16) and global layers interleaved, local base
                  10000 and global base 1e6 with linear scaling 8, head_dim 32, query_pre_attn_scalar
                  24, the four norms stored as offsets from 1, scaled embeddings, GeGLU-tanh,
                  final_logit_softcapping 8
  llama-dynamic   LlamaForCausalLM with dynamic NTK scaling (factor 4, max_position_embeddings 64),
                  DeepSeek-R1-Distill's chat template
  mistral-nemo    MistralForCausalLM with head_dim 16 where hidden / heads is 8 (Mistral-Nemo's
                  head_dim 128 with hidden 5120 and 32 heads), no sliding window, Nemo's template

For length-dependent RoPE (dynamic NTK, LongRoPE) every golden case runs on a freshly loaded model:
transformers keeps the grown dynamic frequencies in the module across calls, while the engine
computes each call's table from that call's length alone; a fresh model per case is where the two
agree by construction (a prefill is one call over the prompt, each decode step one more).
"""

import json
import os

import tinylm_common as C

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE_DIR = os.path.join(HERE, "chat_templates")

# name -> (file, bos_token, eos_token) as the family's tokenizer_config.json names them
TEMPLATES = {
    "qwen3": ("qwen3.jinja", None, "<|im_end|>"),
    "phi3.5-mini": ("phi3.5-mini.jinja", "<s>", "<|endoftext|>"),
    "phi4-mini": ("phi4-mini.jinja", "<|endoftext|>", "<|endoftext|>"),
    "gemma3": ("gemma3.jinja", "<bos>", "<eos>"),
    "mistral-nemo": ("mistral-nemo.jinja", "<s>", "</s>"),
    "deepseek-r1-distill": ("deepseek-r1-distill.jinja", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
}

CONVERSATIONS = {
    "system_user": [{"role": "system", "content": "You are brief."},
                    {"role": "user", "content": "Summarise: the cat sat."}],
    "user": [{"role": "user", "content": "  Summarise the document below.\n\nLe café naïve – 東京 {{ not code }}  "}],
    "multi_turn": [{"role": "system", "content": "Answer in one line."},
                   {"role": "user", "content": "Who sat?"},
                   {"role": "assistant", "content": "<think>\nThe text says the cat.\n</think>\n\nThe cat."},
                   {"role": "user", "content": "Where?"}],
    "two_users": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
}


def read_template(name):
    with open(os.path.join(TEMPLATE_DIR, TEMPLATES[name][0]), encoding="utf-8") as f:
        return f.read()


def template_goldens(out_path):
    """Each family template rendered by transformers for each conversation (or the error it raises)."""
    from transformers.utils.chat_template_utils import render_jinja_template
    out = {"generated_by": "tools/make_tiny_checkpoints.py (tiny_families.template_goldens)",
           "versions": C.library_versions(), "conversations": CONVERSATIONS, "templates": {}}
    for name, (_, bos, eos) in TEMPLATES.items():
        template = read_template(name)
        renders = {}
        for cid, msgs in CONVERSATIONS.items():
            try:
                text, _ = render_jinja_template(conversations=[msgs], chat_template=template, add_generation_prompt=True,
                                                bos_token=bos or "", eos_token=eos or "")
                renders[cid] = {"text": text[0]}
            except Exception as e:  # the template's raise_exception: the engine must refuse too
                renders[cid] = {"error": str(e)}
        out["templates"][name] = {"file": TEMPLATES[name][0], "bos_token": bos, "eos_token": eos,
                                  "chat_template": template, "renders": renders}
    C.write_json(out, out_path)
    return out


def rope_tables(model, cfg):
    """The inverse frequencies transformers rotates with, per layer type, at the lengths where they change."""
    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    rot = model.model.rotary_emb
    types = sorted(set(getattr(cfg, "layer_types", None) or [])) if hasattr(rot, "rope_type") and isinstance(
        rot.rope_type, dict) else [None]
    out = {}
    for lt in types:
        key = lt or "all"
        inv = getattr(rot, f"{lt}_original_inv_freq") if lt else rot.original_inv_freq
        scaling = getattr(rot, f"{lt}_attention_scaling") if lt else rot.attention_scaling
        rtype = rot.rope_type[lt] if lt else rot.rope_type
        entry = {"rope_type": rtype, "inv_freq": C.F32List(inv.detach().float().numpy()),
                 "attention_scaling": float(scaling), "at_length": {}}
        if rtype in ("dynamic", "longrope"):
            for length in (65, 100, 161):  # past the original window, as the forward pass recomputes them
                kw = {"layer_type": lt} if lt else {}
                seq = torch.tensor(length) if rtype == "dynamic" else length
                f, _ = ROPE_INIT_FUNCTIONS[rtype](cfg, None, seq_len=seq, **kw)
                entry["at_length"][str(length)] = C.F32List(f.detach().float().numpy())
        out[key] = entry
    return out


def family_specs(vocab, bos_id, eot_id, eot_text_id):
    """(name, model class name, config class name, config kwargs, template, seed, description, extra cases)."""
    common = dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, initializer_range=C_INIT_STD,
                  bos_token_id=bos_id, eos_token_id=eot_id, tie_word_embeddings=True)
    specs = []
    specs.append(("qwen3-yarn", "Qwen3ForCausalLM", "Qwen3Config", dict(
        common, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=80, rms_norm_eps=1e-6, use_sliding_window=False, hidden_act="silu",
        rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                         "original_max_position_embeddings": 64}),
        "qwen3", 41, "Qwen3ForCausalLM, hidden 32, 3 layers, 4 heads / 2 kv heads, head_dim 16, q/k norms, "
        "YaRN factor 4 over original 64 (max_position_embeddings 80), rope_theta 1e6, tied, fp32", False))
    specs.append(("phi3-longrope", "Phi3ForCausalLM", "Phi3Config", dict(
        common, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
        original_max_position_embeddings=64, rms_norm_eps=1e-5, hidden_act="silu", pad_token_id=eot_text_id,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
                         "short_factor": [1.0, 1.02, 1.05, 1.1, 1.2, 1.3],
                         "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 8.0]}),
        "phi4-mini", 42, "Phi3ForCausalLM as Phi-4-mini: hidden 32, 2 layers, 2 heads / 1 kv head (head_dim 16), "
        "fused qkv_proj and gate_up_proj, partial_rotary_factor 0.75 (12 rotated), LongRoPE over original 64 "
        "(max_position_embeddings 256: factor 4, attention factor sqrt(1 + ln 4 / ln 64)), tied, fp32", True))
    specs.append(("gemma3-text", "Gemma3ForCausalLM", "Gemma3TextConfig", dict(
        common, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
        query_pre_attn_scalar=24, sliding_window=16, max_position_embeddings=4096, rms_norm_eps=1e-6,
        layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
        final_logit_softcapping=8.0, hidden_activation="gelu_pytorch_tanh",
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
        "gemma3", 43, "Gemma3ForCausalLM: hidden 32, 4 layers (sliding, sliding, full, sliding; window 16), "
        "2 heads / 1 kv head, head_dim 32, query_pre_attn_scalar 24, local base 1e4, global base 1e6 with "
        "linear factor 8, final_logit_softcapping 8, GeGLU-tanh, tied, fp32", False))
    specs.append(("llama-dynamic", "LlamaForCausalLM", "LlamaConfig", dict(
        common, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        max_position_embeddings=64, rms_norm_eps=1e-5, hidden_act="silu",
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0}),
        "deepseek-r1-distill", 44, "LlamaForCausalLM, hidden 32, 2 layers, 4 heads / 2 kv heads (head_dim 8), "
        "dynamic NTK factor 4 over max_position_embeddings 64, tied, fp32, DeepSeek-R1-Distill chat template", True))
    specs.append(("mistral-nemo", "MistralForCausalLM", "MistralConfig", dict(
        common, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=1024, rms_norm_eps=1e-5, sliding_window=None, hidden_act="silu",
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "mistral-nemo", 45, "MistralForCausalLM, hidden 32, 2 layers, 4 heads / 2 kv heads, head_dim 16 "
        "(hidden / heads = 8, as Mistral-Nemo's 128 with 5120 / 32), no sliding window, rope_theta 1e6, tied, fp32",
        False))
    return specs


C_INIT_STD = 0.2
N_NEW = 40
SHORT_PROMPT = "The cat sat on the mat."
CHAT_MESSAGES = C.CHAT_MESSAGES


def build_family(spec, out, raw_tokenizer):
    """Writes one family fixture: the shared tokenizer with the family's template, weights, goldens.json."""
    import torch
    import transformers
    name, model_cls_name, cfg_cls_name, kwargs, template, seed, description, length_dependent = spec
    model_cls = getattr(transformers, model_cls_name)
    cfg = getattr(transformers, cfg_cls_name)(**kwargs)
    d = os.path.join(out, name)
    hf_tok, notes = C.save_hf_tokenizer(raw_tokenizer, d, C.EOT_ID, read_template(template))
    torch.manual_seed(seed)
    model = model_cls(cfg)
    C.init_weights(model, seed=seed, std=C_INIT_STD, emb_std=0.15, norm_jitter=0.1)
    if cfg.tie_word_embeddings:
        C.check(model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(), f"{name}: lm_head not tied")
    model.save_pretrained(d)
    return family_goldens(name, model_cls, d, hf_tok, notes, description, seed, template, length_dependent)


def family_goldens(name, model_cls, d, hf_tok, notes, description, seed, template, length_dependent):
    """goldens.json in the schema of make_tiny_checkpoints.make_goldens (Goldens.java reads both), plus the
    RoPE tables transformers rotates with. Every case on a freshly loaded model (see the module docstring)."""
    raw = C.check_tokenizer_agreement(hf_tok, os.path.join(d, "tokenizer.json"), [SHORT_PROMPT])
    pad_id = hf_tok.convert_tokens_to_ids(C.EOT_TEXT)
    prompts = [("short", SHORT_PROMPT), ("long", C.make_paragraph(2024, hf_tok, 120))]
    if length_dependent:  # starts inside the original window of 64 and leaves it while generating
        prompts.append(("crossing", inside_window(hf_tok, 40, 60)))
    cases = []
    for cid, text in prompts:
        model = C.load_fp32(model_cls, d)
        case = {"id": cid}
        case.update(C.golden_case(model, hf_tok, text, N_NEW, pad_id, raw_tok=raw))
        crossing_longrope(model, case)
        cases.append(case)
    chat_prompt = hf_tok.apply_chat_template(CHAT_MESSAGES, tokenize=False, add_generation_prompt=True)
    chat_ids = hf_tok(chat_prompt, add_special_tokens=False)["input_ids"]
    chat = {"messages": CHAT_MESSAGES, "add_generation_prompt": True, "chat_prompt": chat_prompt,
            "note": "input_ids = tokenizer(chat_prompt, add_special_tokens=False)"}
    model = C.load_fp32(model_cls, d)
    chat.update(C.golden_case(model, hf_tok, chat_prompt, N_NEW, pad_id, input_ids=chat_ids, raw_tok=raw))
    crossing_longrope(model, chat)
    model = C.load_fp32(model_cls, d)
    with open(os.path.join(d, "config.json")) as f:
        config_json = json.load(f)
    goldens = {
        "model": name,
        "description": description,
        "generated_by": "tools/make_tiny_checkpoints.py (tiny_families)",
        "seeds": {"weights": seed, "long_prompt": 2024, "crossing_prompt": "2025.. (inside_window)"},
        "versions": C.library_versions(),
        "settings": {"device": "cpu", "compute_dtype": "float32", "attn_implementation": "eager",
                     "max_new_tokens": N_NEW, "stops_at_eos": False, "fresh_model_per_case": True},
        "config_json": config_json,
        "rope_tables": rope_tables(model, model.config),
        "tensors": tensor_listing(d),
        "files": C.file_sizes(d),
        "cases": cases,
        "chat": chat,
        "notes": {"tokenizer_save": notes, "chat_template": template},
    }
    C.write_json(goldens, os.path.join(d, "goldens.json"))
    margins = [m for c in cases + [chat] for m in c["greedy_margins"].values]
    print(f"  {name}: min margin {min(margins):.2e}, "
          + ", ".join(f"{c.get('id', 'chat')} {c['n_prompt_tokens']}+{N_NEW}" for c in cases + [chat]))
    return {"min_margin": float(min(margins)), "files": C.file_sizes(d)}


def crossing_longrope(model, case):
    """A LongRoPE case whose generation passes the original window gets recompute_greedy's continuation."""
    rope = model.config.rope_parameters
    if rope.get("rope_type") != "longrope":
        return
    window = rope["original_max_position_embeddings"]
    if case["n_prompt_tokens"] <= window < case["n_prompt_tokens"] + len(case["greedy_ids"]):
        recompute_greedy(model, case, window)


def recompute_greedy(model, case, window):
    """Replaces a LongRoPE case's greedy continuation by transformers' model run as Phi-3's generation means
    to run it: cached decoding, and at the first step past the original window (position `window`) one call
    over the whole sequence (every key rotated with the long factors) whose cache the later steps extend.

    transformers 5.18's Phi3ForCausalLM.prepare_inputs_for_generation drops the cache there, but generate
    then feeds only the newest token (cache_position) with no cache, and drops the one-token cache again on
    every later step (its length stays <= the window): each token past the window attends to itself alone.
    Instrumenting the model's forward calls shows it (input (1, 1), past_key_values None from position 64 on);
    the engine implements the recompute the code's comment describes, and this is its reference."""
    import numpy as np
    import torch
    from transformers import DynamicCache
    seq = list(case["input_ids"])
    ids, margins = [], []
    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        out = model(torch.tensor([seq]), past_key_values=cache, use_cache=True)
        for _ in range(len(case["greedy_ids"])):
            row = out.logits[0, -1].float().numpy()
            nxt = int(row.argmax())
            top2 = np.sort(row.astype(np.float64))[-2:]
            ids.append(nxt)
            margins.append(float(top2[1] - top2[0]))
            seq.append(nxt)
            pos = len(seq) - 1
            if pos == window:
                cache = DynamicCache(config=model.config)
                out = model(torch.tensor([seq]), past_key_values=cache, use_cache=True)
            else:
                out = model(torch.tensor([[nxt]]), past_key_values=cache, use_cache=True,
                            position_ids=torch.tensor([[pos]]))
    case["greedy_ids_transformers_generate"] = case["greedy_ids"]
    case["greedy_ids"] = ids
    case["greedy_margins"] = C.F32List(margins)
    case["greedy_min_margin"] = min(margins)
    case["greedy_source"] = "recompute_at_window (see tiny_families.recompute_greedy)"


def inside_window(tok, low, high):
    """A generated paragraph of low..high tokens (with BOS): the first seed from 2025 on that gives one."""
    for seed in range(2025, 2125):
        text = C.make_paragraph(seed, tok, low)
        if len(tok(text)["input_ids"]) <= high:
            return text
    raise RuntimeError(f"no paragraph of {low}..{high} tokens")


def tensor_listing(model_dir):
    from safetensors import safe_open
    out = {}
    for f in sorted(os.listdir(model_dir)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(model_dir, f), framework="pt") as sf:
                for k in sf.keys():
                    t = sf.get_slice(k)
                    out[k] = {"file": f, "dtype": t.get_dtype(), "shape": list(t.get_shape())}
    return dict(sorted(out.items()))
