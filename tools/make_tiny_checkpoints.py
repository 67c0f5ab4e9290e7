#!/usr/bin/env python3
"""Tiny random Hugging Face checkpoints + golden outputs for the gpu-engine tests.

Writes four model folders under --out (each a complete HF checkpoint plus goldens.json):

  llama-gqa    LlamaForCausalLM, GQA 4q/2kv heads (head_dim 16), llama3 RoPE scaling, untied, fp32,
               Llama 3 chat template, eos_token_id list in config.json
  llama-tied   LlamaForCausalLM, 8q/2kv heads (head_dim 8), tied embeddings, plain RoPE 10000,
               no chat template, sharded safetensors + model.safetensors.index.json
  qwen2-bias   Qwen2ForCausalLM, non-zero q/k/v biases, rope_theta 1e6, Llama 3.1 style template
  llama-bf16   llama-gqa's weights stored as bfloat16 (goldens from those weights upcast to fp32)

All four share one byte-level BPE tokenizer (Llama 3 layout) trained here on a generated corpus.
tiny_families.py adds the families of issue 34 on the same tokenizer (qwen3-yarn, phi3-longrope,
gemma3-text, llama-dynamic, mistral-nemo; see its docstring), and --templates-out writes the goldens
of the families' chat templates (tools/chat_templates) rendered by transformers.
goldens.json holds, per prompt: input_ids, fp32 logits at the first and last prompt position
(full vocabulary, exact float32 values), 40 greedy tokens from model.generate (never stopping at
EOS) with the top1-top2 logit margin of each step, and the chat-template rendering where there
is a template. Everything runs on CPU in float32 with attn_implementation="eager".

Run on a host with torch + transformers + tokenizers + safetensors:
    python3 tools/make_tiny_checkpoints.py --out /tmp/tiny-models
    python3 tools/make_tiny_checkpoints.py --out /tmp/tiny-models --only qwen3-yarn,gemma3-text \
        --templates-out /tmp/chat-template-goldens.json
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tinylm_common as C  # noqa: E402
import tiny_families as F  # noqa: E402

CORPUS_SEED = 1234
TOKENIZER_TRAINED_VOCAB = 1000        # + 5 special tokens; model vocab rounds up to 1024
N_NEW = 40
INIT_STD = 0.2                        # attention/MLP matrices (see tinylm_common.init_weights)
EMB_STD = 0.15                        # embed_tokens / lm_head
SHORT_PROMPT = "The cat sat on the mat."
NON_ASCII_PROMPT = "Le café naïve – 東京 → Zürich: 3½ €, ça va? 😊 Ünïcödé “quotes” ok."
LONG_PROMPT_SEED = 2024
LONG_PROMPT_TOKENS = 120


def build_tokenizers(out_root):
    """Train once, save three HF variants into per-model folders. Returns dict name -> (hf, notes)."""
    corpus = C.make_corpus(CORPUS_SEED)
    raw = C.train_bpe_tokenizer(corpus, TOKENIZER_TRAINED_VOCAB)
    print(f"tokenizer: {raw.get_vocab_size(with_added_tokens=True)} tokens "
          f"({raw.get_vocab_size(with_added_tokens=False)} without added), corpus {len(corpus)} paragraphs, "
          f"{sum(len(p) for p in corpus)} chars")
    variants = {
        "llama-gqa": (C.EOT_ID, C.LLAMA3_CHAT_TEMPLATE),
        "llama-bf16": (C.EOT_ID, C.LLAMA3_CHAT_TEMPLATE),
        "llama-tied": (C.EOT_TEXT, None),
        "qwen2-bias": (C.EOT_ID, C.LLAMA31_CHAT_TEMPLATE),
    }
    result = {}
    for name, (eos, template) in variants.items():
        d = os.path.join(out_root, name)
        result[name] = C.save_hf_tokenizer(raw, d, eos, template)
    return result


def save_sharded(model, out_dir, max_shard_size):
    """save_pretrained with a small shard size; if transformers did not shard, write the HF
    layout ourselves (model-0000i-of-0000n.safetensors + model.safetensors.index.json)."""
    model.save_pretrained(out_dir, max_shard_size=max_shard_size)
    if os.path.exists(os.path.join(out_dir, "model.safetensors.index.json")):
        return "transformers save_pretrained(max_shard_size=%r)" % max_shard_size
    from safetensors.torch import save_file
    os.remove(os.path.join(out_dir, "model.safetensors"))
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    limit = 100 * 1000
    shards, cur, cur_size = [], {}, 0
    for k, v in state.items():
        size = v.numel() * v.element_size()
        if cur and cur_size + size > limit:
            shards.append(cur)
            cur, cur_size = {}, 0
        cur[k] = v
        cur_size += size
    shards.append(cur)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards, 1):
        fname = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(out_dir, fname), metadata={"format": "pt"})
        for k, v in shard.items():
            weight_map[k] = fname
            total += v.numel() * v.element_size()
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    return "manual shards (transformers did not shard)"


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


def make_goldens(name, model_cls, model_dir, hf_tok, tok_notes, description, seed, rope_spec, extra):
    model = C.load_fp32(model_cls, model_dir)
    cfg = model.config
    raw = C.check_tokenizer_agreement(hf_tok, os.path.join(model_dir, "tokenizer.json"),
                                      [SHORT_PROMPT, NON_ASCII_PROMPT])
    long_prompt = C.make_paragraph(LONG_PROMPT_SEED, hf_tok, LONG_PROMPT_TOKENS)
    C.check_tokenizer_agreement(hf_tok, os.path.join(model_dir, "tokenizer.json"), [long_prompt])

    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    exp_inv, regimes = C.expected_inv_freq(head_dim, rope_spec["theta"], rope_spec.get("scaling"))
    got_inv = C.model_inv_freq(model)
    rope = {"theta": rope_spec["theta"], "scaling": rope_spec.get("scaling"),
            "expected_inv_freq": [float(x) for x in exp_inv], "regimes": regimes}
    if got_inv is not None:
        rope["model_inv_freq"] = C.F32List(got_inv)
        rope["model_matches_expected"] = bool(np.allclose(got_inv, exp_inv, rtol=2e-6, atol=0))
        C.check(rope["model_matches_expected"], f"{name}: model inv_freq {got_inv} != expected {exp_inv}")
    pad_id = hf_tok.convert_tokens_to_ids(C.EOT_TEXT)

    cases = []
    for cid, text in (("short", SHORT_PROMPT), ("long", long_prompt), ("non_ascii", NON_ASCII_PROMPT)):
        case = {"id": cid}
        case.update(C.golden_case(model, hf_tok, text, N_NEW, pad_id, raw_tok=raw))
        cases.append(case)

    chat = None
    if getattr(hf_tok, "chat_template", None):
        chat_prompt = hf_tok.apply_chat_template(C.CHAT_MESSAGES, tokenize=False, add_generation_prompt=True)
        chat_ids = hf_tok(chat_prompt, add_special_tokens=False)["input_ids"]
        via = hf_tok.apply_chat_template(C.CHAT_MESSAGES, tokenize=True, add_generation_prompt=True)
        if hasattr(via, "keys") and "input_ids" in via:
            via = via["input_ids"]
        via = list(via)
        if via and isinstance(via[0], list):
            via = via[0]
        C.check(via == chat_ids, f"{name}: apply_chat_template(tokenize=True) {via} != encode(text) {chat_ids}")
        C.check(raw.encode(chat_prompt, add_special_tokens=False).ids == chat_ids, f"{name}: raw chat ids differ")
        chat = {"messages": C.CHAT_MESSAGES, "add_generation_prompt": True, "chat_prompt": chat_prompt,
                "note": "input_ids = tokenizer(chat_prompt, add_special_tokens=False); the template itself emits bos_token"}
        chat.update(C.golden_case(model, hf_tok, chat_prompt, N_NEW, pad_id, input_ids=chat_ids, raw_tok=raw))

    with open(os.path.join(model_dir, "config.json")) as f:
        config_json = json.load(f)
    goldens = {
        "model": name,
        "description": description,
        "generated_by": "tools/make_tiny_checkpoints.py",
        "seeds": {"corpus": CORPUS_SEED, "weights": seed, "long_prompt": LONG_PROMPT_SEED},
        "versions": C.library_versions(),
        "settings": {"device": "cpu", "compute_dtype": "float32", "attn_implementation": "eager",
                     "max_new_tokens": N_NEW, "stops_at_eos": False,
                     "weight_init": {"matrices_std": INIT_STD, "embed_lm_head_std": EMB_STD,
                                     "norm_weights": "1 + N(0, 0.1)", "qwen2_qkv_bias_std": 0.2},
                     "logits": "float32 values written with the shortest decimal that round-trips exactly"},
        "tokenizer": {"len": len(hf_tok), "model_vocab_size": cfg.vocab_size,
                      "bos_token": C.BOS, "bos_token_id": hf_tok.convert_tokens_to_ids(C.BOS),
                      "eos_token": hf_tok.eos_token, "eos_token_id": hf_tok.eos_token_id,
                      "special_token_ids": {t: hf_tok.convert_tokens_to_ids(t) for t in C.SPECIAL_TOKENS},
                      "has_chat_template": chat is not None},
        "config_json": config_json,
        "rope": rope,
        "tensors": tensor_listing(model_dir),
        "files": C.file_sizes(model_dir),
        "cases": cases,
        "chat": chat,
        "notes": {"tokenizer_save": tok_notes, **extra},
    }
    C.write_json(goldens, os.path.join(model_dir, "goldens.json"))
    margins = [m for c in cases + ([chat] if chat else []) for m in c["greedy_margins"].values]
    summary = {
        "min_margin": float(min(margins)),
        "margins_below_1e-3": int(sum(m < 1e-3 for m in margins)),
        "n_steps": len(margins),
        "per_case_min": {c.get("id", "chat"): c["greedy_min_margin"] for c in cases + ([chat] if chat else [])},
        "distinct_greedy_tokens": {c.get("id", "chat"): len(set(c["greedy_ids"])) for c in cases + ([chat] if chat else [])},
        "recompute_mismatches": {c.get("id", "chat"): c["greedy_recompute_mismatches"] for c in cases + ([chat] if chat else [])},
        "greedy_source": sorted({c["greedy_source"] for c in cases + ([chat] if chat else [])}),
    }
    print(f"  {name}: {json.dumps(summary)}")
    for c in cases + ([chat] if chat else []):
        print(f"    [{c.get('id', 'chat')}] {c['n_prompt_tokens']} prompt tokens -> {c['greedy_text']!r}")
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (one sub-folder per model)")
    ap.add_argument("--only", default="", help="comma-separated fixture names to write (default: all)")
    ap.add_argument("--templates-out", default="", help="also write the chat-template goldens to this file")
    args = ap.parse_args()
    only = {n for n in args.only.split(",") if n}

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.set_num_threads(1)  # reproducible float summation order
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    print("versions:", C.library_versions())

    toks = build_tokenizers(out)
    if args.templates_out:
        F.template_goldens(args.templates_out)
        print(f"chat-template goldens: {args.templates_out}")
    hf = toks["llama-gqa"][0]
    n_tok = len(hf)
    vocab = C.round_up(n_tok, 64)
    bos_id = hf.convert_tokens_to_ids(C.BOS)
    eot_text_id = hf.convert_tokens_to_ids(C.EOT_TEXT)
    eot_id = hf.convert_tokens_to_ids(C.EOT_ID)
    print(f"tokenizer len {n_tok}, model vocab {vocab}, bos {bos_id}, end_of_text {eot_text_id}, eot {eot_id}")
    summaries = {}
    families = F.family_specs(vocab, bos_id, eot_id, eot_text_id)
    raw = C.train_bpe_tokenizer(C.make_corpus(CORPUS_SEED), TOKENIZER_TRAINED_VOCAB)
    for spec in families:
        if not only or spec[0] in only:
            summaries[spec[0]] = F.build_family(spec, out, raw)
    if only and not only & {"llama-gqa", "llama-tied", "qwen2-bias", "llama-bf16"}:
        print(json.dumps({k: v["min_margin"] for k, v in summaries.items()}))
        return

    # (a) llama-gqa ------------------------------------------------------------------------------
    llama3_scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 256}
    cfg_a = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=160, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
        rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=INIT_STD,
        bos_token_id=bos_id, eos_token_id=[eot_text_id, eot_id], hidden_act="silu",
        **C.rope_kwargs(LlamaConfig, 500000.0, llama3_scaling))
    torch.manual_seed(11)
    model_a = LlamaForCausalLM(cfg_a)
    C.init_weights(model_a, seed=11, std=INIT_STD, emb_std=EMB_STD)
    d_a = os.path.join(out, "llama-gqa")
    model_a.save_pretrained(d_a)
    summaries["llama-gqa"] = make_goldens(
        "llama-gqa", LlamaForCausalLM, d_a, *toks["llama-gqa"],
        "LlamaForCausalLM, hidden 64, 4 layers, 4 heads / 2 kv heads (head_dim 16), intermediate 160, "
        "rope_theta 500000 with llama3 scaling (factor 8, low 1, high 4, original 256), untied, fp32",
        11, {"theta": 500000.0, "scaling": llama3_scaling}, {})

    # (d) llama-bf16: the same weights, stored as bfloat16 ------------------------------------------
    d_d = os.path.join(out, "llama-bf16")
    model_d = C.clone_model(model_a).to(torch.bfloat16)
    model_d.save_pretrained(d_d)
    reloaded = C.load_fp32(LlamaForCausalLM, d_d)
    ref = {k: v.to(torch.bfloat16).float() for k, v in model_a.state_dict().items()}
    for k, v in reloaded.state_dict().items():
        C.check(k in ref and torch.equal(v, ref[k]), f"bf16 round trip changed {k}")
    del reloaded
    summaries["llama-bf16"] = make_goldens(
        "llama-bf16", LlamaForCausalLM, d_d, *toks["llama-bf16"],
        "llama-gqa's weights rounded to bfloat16 and stored as bf16; goldens computed in fp32 from the "
        "bf16 values upcast exactly to fp32", 11, {"theta": 500000.0, "scaling": llama3_scaling},
        {"weights": "identical to llama-gqa after round-to-nearest-even to bf16"})

    # (b) llama-tied, sharded --------------------------------------------------------------------
    cfg_b = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=2, head_dim=8, max_position_embeddings=1024,
        rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=INIT_STD,
        bos_token_id=bos_id, eos_token_id=eot_text_id, hidden_act="silu",
        **C.rope_kwargs(LlamaConfig, 10000.0))
    torch.manual_seed(22)
    model_b = LlamaForCausalLM(cfg_b)
    model_b.tie_weights()
    C.init_weights(model_b, seed=22, std=INIT_STD, emb_std=EMB_STD)
    C.check(model_b.lm_head.weight.data_ptr() == model_b.model.embed_tokens.weight.data_ptr(),
            "llama-tied: lm_head is not tied to embed_tokens after construction")
    d_b = os.path.join(out, "llama-tied")
    how = save_sharded(model_b, d_b, "100KB")
    print(f"  llama-tied shards: {how}: {sorted(f for f in os.listdir(d_b) if 'safetensors' in f)}")
    summaries["llama-tied"] = make_goldens(
        "llama-tied", LlamaForCausalLM, d_b, *toks["llama-tied"],
        "LlamaForCausalLM, hidden 64, 2 layers, 8 heads / 2 kv heads (head_dim 8), intermediate 128, "
        "tied embeddings (no lm_head.weight stored), rope_theta 10000, sharded, no chat template, fp32",
        22, {"theta": 10000.0}, {"sharding": how})

    # (c) qwen2-bias -----------------------------------------------------------------------------
    cfg_c = Qwen2Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        rms_norm_eps=1e-6, tie_word_embeddings=False, initializer_range=INIT_STD,
        use_sliding_window=False, bos_token_id=bos_id, eos_token_id=eot_id, hidden_act="silu",
        **C.rope_kwargs(Qwen2Config, 1000000.0))
    torch.manual_seed(33)
    model_c = Qwen2ForCausalLM(cfg_c)
    C.init_weights(model_c, seed=33, std=INIT_STD, emb_std=EMB_STD, bias_std=0.2)
    biases = [n for n, _ in model_c.named_parameters() if n.endswith(".bias")]
    assert biases and all(any(p in n for p in ("q_proj", "k_proj", "v_proj")) for n in biases), biases
    d_c = os.path.join(out, "qwen2-bias")
    model_c.save_pretrained(d_c)
    summaries["qwen2-bias"] = make_goldens(
        "qwen2-bias", Qwen2ForCausalLM, d_c, *toks["qwen2-bias"],
        "Qwen2ForCausalLM, hidden 64, 3 layers, 4 heads / 2 kv heads (head_dim 16), intermediate 128, "
        "q/k/v biases ~ N(0, 0.2), rope_theta 1e6, rms_norm_eps 1e-6, untied, fp32, Llama 3.1 style template",
        33, {"theta": 1000000.0}, {"bias_tensors": biases})

    total = 0
    print("files:")
    for name in ("llama-gqa", "llama-tied", "qwen2-bias", "llama-bf16"):
        d = os.path.join(out, name)
        for f, s in C.file_sizes(d).items():
            total += s
            print(f"  {name}/{f}: {s}")
    print(f"total bytes: {total}")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"margins": summaries, "total_bytes": total, "versions": C.library_versions(),
                   "warnings": C.WARNINGS}, f, indent=2)
    print(f"{len(C.WARNINGS)} warnings")
    for w in C.WARNINGS:
        print("  WARNING:", w)


if __name__ == "__main__":
    main()
