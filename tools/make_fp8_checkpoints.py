#!/usr/bin/env python3
"""Tiny FP8 Hugging Face checkpoints + golden outputs for the engine's FP8 tests (a sibling of
make_tiny_checkpoints.py, with the same tokenizer, init and golden format).

Writes five model folders under --out (config.json with quantization_config, model.safetensors
with float8_e4m3fn weights and their scales, tokenizer, goldens.json) and e4m3.json:

  fp8-block128  transformers "fp8" format: weight_block_size [128, 128], fp32 weight_scale_inv,
                activation_scheme dynamic, modules_to_not_convert [lm_head, layers.1.mlp.down_proj]
                (kept bf16); quantized by transformers' own Fp8Quantize op
  fp8-tensor    transformers "fp8" format, weight_block_size null (one scale per tensor), activation_scheme
                static with calibrated activation_scale; lm_head bf16 (transformers' default skip)
  ct-channel    compressed-tensors float-quantized: per-channel bf16 weight_scale, dynamic per-token
                input activations, ignore [lm_head, re:.*layers\\.0\\.self_attn\\.o_proj$]
  ct-tensor     compressed-tensors: per-tensor float16 weight_scale (an fp16 model: the product is
                rounded to fp16), static input_scale, lm_head quantized too (ignore empty)
  ct-block128   compressed-tensors: 128x128 block bf16 weight_scale, dynamic group-128 input
                activations, two config groups (attention by regex; mlp by regex and lm_head by name),
                ignore [re:.*layers\\.1\\.self_attn\\.v_proj$]

Goldens. transformers reads the fp8 format on CPU itself: with no GPU it dequantizes at load
(FineGrainedFP8HfQuantizer sets dequantize=True; Fp8Dequantize: q.to(float32) * scale), so the
fp8-* goldens are transformers' own output for the checkpoint folder, loaded in float32. Its quantizer
checks that accelerate is installed although the dequantize path does not use it; accelerate is
not in the venv this runs in, so the check is patched out (nothing else is). transformers cannot read
compressed-tensors here: its quantizer needs the compressed-tensors package, which is not installable
on this host (no PyPI). The ct-* goldens are therefore the dequantized model run through transformers:
the weights are dequantized as compressed-tensors' _dequantize does (x_q.to(scale.dtype) * scale,
blocks by _process_block's layout), written as a plain float32 checkpoint and loaded with
LlamaForCausalLM. Neither golden quantizes activations: transformers' dequantized fp8 model runs
plain F.linear, and the CPU engine is that reference (the GPU's activation quantization is checked
against it within FP8 tolerances).

goldens.json also holds, per FP8 weight, the float64 sum of its dequantized fp32 values and 32
sampled (index, value) pairs, so a test checks the engine's dequantization element by element
without the dequantized weights being committed.

    python3 tools/make_fp8_checkpoints.py --out /tmp/fp8-models
    cp -r /tmp/fp8-models/* gpu-engine/src/test/resources/models/   (e4m3.json goes to .../models/fp8-e4m3.json)
"""

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tinylm_common as C  # noqa: E402
from make_tiny_checkpoints import (CORPUS_SEED, EMB_STD, INIT_STD, LONG_PROMPT_SEED,  # noqa: E402
                                   LONG_PROMPT_TOKENS, N_NEW, SHORT_PROMPT, TOKENIZER_TRAINED_VOCAB)

FP8_MAX = 448.0
SAMPLES = 32


def fp8_format_quantize(weight, block):
    """transformers' own quantizer (Fp8Quantize._quantize_one) for the fp8 format."""
    from transformers import FineGrainedFP8Config
    from transformers.integrations.finegrained_fp8 import Fp8Quantize

    class Holder:
        quantization_config = FineGrainedFP8Config(weight_block_size=block)
    out = Fp8Quantize(Holder())._quantize_one("w.weight", weight)
    return out["w.weight"], out["w.weight_scale_inv"]


def ct_quantize(weight, strategy, block, scale_dtype):
    """compressed-tensors' FP8 quantization written out (the package is not installable here): scale =
    max|w| / 448 per tensor / row / block in the weight's dtype, q = clamp(w / scale) to e4m3."""
    import torch
    w = weight.to(scale_dtype).float()
    rows, cols = w.shape
    if strategy == "tensor":
        scale = (w.abs().max() / FP8_MAX).reshape(1)
        full = scale.reshape(1, 1)
    elif strategy == "channel":
        scale = (w.abs().amax(dim=1, keepdim=True) / FP8_MAX)
        full = scale
    else:
        bh, bw = block
        sr, sc = -(-rows // bh), -(-cols // bw)
        padded = torch.zeros(sr * bh, sc * bw)
        padded[:rows, :cols] = w.abs()
        scale = padded.reshape(sr, bh, sc, bw).amax(dim=(1, 3)) / FP8_MAX
        full = scale.repeat_interleave(bh, 0).repeat_interleave(bw, 1)[:rows, :cols]
    scale = scale.to(scale_dtype)
    full = full.to(scale_dtype).float()
    q = torch.clamp(w / full, -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


def ct_dequantize(q, scale, strategy, block):
    """compressed-tensors' _dequantize: x_q.to(scale.dtype) * scale (broadcast per strategy; blocks as
    _process_block lays them out), then to float32 for the reference model."""
    rows, cols = q.shape
    if strategy == "tensor":
        s = scale.reshape(1, 1)
    elif strategy == "channel":
        s = scale.reshape(rows, 1)
    else:
        bh, bw = block
        s = scale.repeat_interleave(bh, 0).repeat_interleave(bw, 1)[:rows, :cols]
    return (q.to(scale.dtype) * s).float()


def patch_accelerate_check():
    import transformers.quantizers.quantizer_finegrained_fp8 as qf
    qf.is_accelerate_available = lambda: True


def dequant_checks(deq, seed):
    """Float64 sum and SAMPLES exact (flat index, fp32 value) pairs per dequantized weight."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in sorted(deq):
        v = deq[name].detach().float().numpy().reshape(-1)
        idx = sorted(rng.choice(v.size, size=min(SAMPLES, v.size), replace=False).tolist())
        out[name] = {"sum": float(v.astype(np.float64).sum()), "index": idx, "value": C.F32List(v[idx])}
    return out


def write_checkpoint(d, cfg, tensors, quant_config, hf_tok_src):
    from safetensors.torch import save_file
    os.makedirs(d, exist_ok=True)
    cfg.save_pretrained(d)
    with open(os.path.join(d, "config.json")) as f:
        cj = json.load(f)
    cj["quantization_config"] = quant_config
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cj, f, indent=2)
        f.write("\n")
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(d, "model.safetensors"),
              metadata={"format": "pt"})
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(hf_tok_src, f), os.path.join(d, f))


def calibrate_input_scales(model, hf_tok, texts):
    """max |input| / 448 of every linear layer over a few prompts: static activation scales."""
    import torch
    amax = {}
    hooks = []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear):
            def hook(m, args, name=name):
                amax[name] = max(amax.get(name, 0.0), float(args[0].abs().max()))
            hooks.append(mod.register_forward_pre_hook(hook))
    with torch.no_grad():
        for t in texts:
            model(torch.tensor([hf_tok(t)["input_ids"]]))
    for h in hooks:
        h.remove()
    return {k: torch.tensor(v / FP8_MAX, dtype=torch.float32) for k, v in amax.items()}


def make_model(cfg_kwargs, seed, vocab, bos_id, eos_ids):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=vocab, max_position_embeddings=2048, rms_norm_eps=1e-5, tie_word_embeddings=False,
                      initializer_range=INIT_STD, bos_token_id=bos_id, eos_token_id=eos_ids, hidden_act="silu",
                      **C.rope_kwargs(LlamaConfig, 500000.0), **cfg_kwargs)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    C.init_weights(model, seed=seed, std=INIT_STD, emb_std=EMB_STD)
    model.eval()
    return cfg, model


def goldens(name, model, hf_tok, raw, long_prompt, description, source, d, checks, pad_id):
    cases = []
    for cid, text in (("short", SHORT_PROMPT), ("long", long_prompt)):
        case = {"id": cid}
        case.update(C.golden_case(model, hf_tok, text, N_NEW, pad_id, raw_tok=raw))
        cases.append(case)
    with open(os.path.join(d, "config.json")) as f:
        config_json = json.load(f)
    g = {"model": name, "description": description, "generated_by": "tools/make_fp8_checkpoints.py",
         "golden_source": source, "versions": C.library_versions(),
         "settings": {"device": "cpu", "compute_dtype": "float32", "attn_implementation": "eager",
                      "max_new_tokens": N_NEW, "stops_at_eos": False},
         "config_json": config_json, "files": C.file_sizes(d), "dequantized_weights": checks, "cases": cases, "chat": None}
    C.write_json(g, os.path.join(d, "goldens.json"))
    margins = [m for c in cases for m in c["greedy_margins"].values]
    print(f"  {name}: min margin {min(margins):.2e}, files {C.file_sizes(d)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch
    from transformers import LlamaForCausalLM

    torch.set_num_threads(1)
    patch_accelerate_check()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)

    # the 256 e4m3 values as PyTorch widens them, bit for bit (NaN's sign and payload included)
    bits = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).to(torch.float32).view(torch.int32)
    # and the other way: fp32 values (random magnitudes, every midpoint between neighbouring e4m3 values,
    # out of range) clamped to +-448 and cast, as the quantizers do
    g = torch.Generator().manual_seed(7)
    finite = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).to(torch.float32)
    finite = torch.unique(finite[torch.isfinite(finite)])
    mids = (finite[1:] + finite[:-1]) / 2
    rnd = torch.randn(1500, generator=g) * torch.exp2(torch.randint(-14, 10, (1500,), generator=g).float())
    xs = torch.cat([mids, -mids, rnd, torch.tensor([1000.0, -1000.0, 448.0, 464.0, 0.0, -0.0, 1e-30])])
    enc = torch.clamp(xs, -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(torch.uint8)
    with open(os.path.join(out, "e4m3.json"), "w") as f:
        json.dump({"generated_by": "tools/make_fp8_checkpoints.py", "torch": torch.__version__,
                   "f32_bits_by_byte": [int(b) & 0xffffffff for b in bits.tolist()],
                   "encode_f32_bits": [int(b) & 0xffffffff for b in xs.view(torch.int32).tolist()],
                   "encode_byte": [int(b) for b in enc.tolist()]}, f)
        f.write("\n")

    corpus = C.make_corpus(CORPUS_SEED)
    raw = C.train_bpe_tokenizer(corpus, TOKENIZER_TRAINED_VOCAB)
    tok_dir = tempfile.mkdtemp()
    hf_tok, _ = C.save_hf_tokenizer(raw, tok_dir, C.EOT_ID, None)
    vocab = C.round_up(len(hf_tok), 64)
    bos_id = hf_tok.convert_tokens_to_ids(C.BOS)
    eos_ids = [hf_tok.convert_tokens_to_ids(C.EOT_TEXT), hf_tok.convert_tokens_to_ids(C.EOT_ID)]
    pad_id = eos_ids[0]
    long_prompt = C.make_paragraph(LONG_PROMPT_SEED, hf_tok, LONG_PROMPT_TOKENS)
    big = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, head_dim=64)
    small = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16)
    linear = lambda k: k.endswith("_proj.weight") or k == "lm_head.weight"  # noqa: E731

    # (1) fp8 format, 128x128 blocks, transformers' own quantizer and loader ------------------------
    for name, shape, seed, block, act, skip in (
            ("fp8-block128", big, 41, [128, 128], "dynamic", ["lm_head", "model.layers.1.mlp.down_proj"]),
            ("fp8-tensor", small, 42, None, "static", None)):
        cfg, model = make_model(shape, seed, vocab, bos_id, eos_ids)
        sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
        kept = skip or ["lm_head"]  # transformers skips the output embedding by default
        tensors, deq = {}, {}
        for k, v in sd.items():
            module = k[:-len(".weight")]
            if linear(k) and not any(module == s or module.endswith(s) for s in kept):
                q, s = fp8_format_quantize(v, block)
                tensors[k], tensors[k + "_scale_inv"] = q, s
                rows, cols = q.shape
                br, bc = rows // s.shape[0], cols // s.shape[1]
                deq[k] = q.float() * s.repeat_interleave(br, 0).repeat_interleave(bc, 1)
            else:
                tensors[k] = v.to(torch.bfloat16)
        if act == "static":
            for m, s in calibrate_input_scales(model, hf_tok, [SHORT_PROMPT, long_prompt]).items():
                if m + ".weight" in deq:
                    tensors[m + ".activation_scale"] = s
        qc = {"quant_method": "fp8", "activation_scheme": act, "weight_block_size": block}
        if skip:
            qc["modules_to_not_convert"] = skip
        d = os.path.join(out, name)
        write_checkpoint(d, cfg, tensors, qc, tok_dir)
        ref = LlamaForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32).eval()
        C.check(type(ref.model.layers[0].self_attn.q_proj) is torch.nn.Linear, f"{name}: transformers did not dequantize")
        params = dict(ref.named_parameters())
        for k, v in deq.items():
            C.check(torch.equal(params[k], v), f"{name}: transformers' dequantized {k} differs from q * scale")
        goldens(name, ref, hf_tok, raw, long_prompt,
                f"LlamaForCausalLM {shape}, fp8 format, weight_block_size {block}, activation_scheme {act}",
                "transformers' own output: from_pretrained(dtype=float32) on this folder, which dequantizes on CPU "
                "(Fp8Dequantize: q.to(float32) * weight_scale_inv); the accelerate-installed check patched out",
                d, dequant_checks(deq, seed), pad_id)

    # (2) compressed-tensors, dequantized reference ----------------------------------------------------
    cases = (
        ("ct-channel", small, 51, "channel", None, torch.bfloat16,
         {"type": "float", "num_bits": 8, "strategy": "token", "dynamic": True, "symmetric": True},
         ["lm_head", "re:.*layers\\.0\\.self_attn\\.o_proj$"], [["Linear"]]),
        ("ct-tensor", small, 52, "tensor", None, torch.float16,
         {"type": "float", "num_bits": 8, "strategy": "tensor", "dynamic": False, "symmetric": True},
         [], [["Linear"]]),
        ("ct-block128", big, 53, "block", [128, 128], torch.bfloat16,
         {"type": "float", "num_bits": 8, "strategy": "group", "group_size": 128, "dynamic": True, "symmetric": True},
         ["re:.*layers\\.1\\.self_attn\\.v_proj$"],
         [["re:.*self_attn\\.(q|k|v|o)_proj$"], ["re:.*mlp\\.(gate|up|down)_proj$", "lm_head"]]),
    )
    import re
    for name, shape, seed, strategy, block, dtype, inputs, ignore, target_groups in cases:
        cfg, model = make_model(shape, seed, vocab, bos_id, eos_ids)
        cfg.dtype = str(dtype).replace("torch.", "")
        sd = {k: v.detach().clone() for k, v in model.state_dict().items()}

        def matches(module, targets):
            return any((re.match(t[3:], module) if t.startswith("re:") else t in (module, "Linear")) for t in targets)
        tensors, deq = {}, {}
        for k, v in sd.items():
            module = k[:-len(".weight")]
            if linear(k) and any(matches(module, t) for t in target_groups) and not matches(module, ignore):
                q, s = ct_quantize(v, strategy, block, dtype)
                tensors[k], tensors[module + ".weight_scale"] = q, s
                deq[k] = ct_dequantize(q, s, strategy, block)
            else:
                tensors[k] = v.to(dtype)
        if not inputs["dynamic"]:
            for m, s in calibrate_input_scales(model, hf_tok, [SHORT_PROMPT, long_prompt]).items():
                if m + ".weight" in deq:
                    tensors[m + ".input_scale"] = s.to(dtype).reshape(1)
        weights = {"type": "float", "num_bits": 8, "strategy": strategy, "dynamic": False, "symmetric": True,
                   "block_structure": block}
        qc = {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
              "config_groups": {f"group_{i}": {"targets": t, "weights": weights, "input_activations": inputs,
                                               "output_activations": None}
                                for i, t in enumerate(target_groups)},
              "ignore": ignore, "kv_cache_scheme": None, "sparsity_config": {}}
        d = os.path.join(out, name)
        write_checkpoint(d, cfg, tensors, qc, tok_dir)
        plain = tempfile.mkdtemp()
        ref = LlamaForCausalLM(cfg)  # the same config, without quantization_config
        ref.load_state_dict({k: (deq[k] if k in deq else v.float()) for k, v in tensors.items()
                             if not k.endswith("_scale")}, strict=True)
        ref.to(torch.float32).save_pretrained(plain)
        ref = C.load_fp32(LlamaForCausalLM, plain)
        goldens(name, ref, hf_tok, raw, long_prompt,
                f"LlamaForCausalLM {shape}, compressed-tensors fp8 weights {strategy} {block or ''}, "
                f"scales {dtype}, input activations {inputs}, ignore {ignore}",
                "the dequantized model through transformers: weights dequantized as compressed-tensors' _dequantize "
                "does (x_q.to(scale.dtype) * scale), saved as float32, loaded with LlamaForCausalLM (transformers "
                "needs the compressed-tensors package for this format, which cannot be installed on this host)",
                d, dequant_checks(deq, seed), pad_id)
        shutil.rmtree(plain)

    print(f"{len(C.WARNINGS)} warnings")
    for w in C.WARNINGS:
        print("  WARNING:", w)


if __name__ == "__main__":
    main()
