#!/usr/bin/env python3
"""Independent check of the tiny checkpoints' goldens with a plain numpy forward pass.

Needs only numpy (no torch/transformers): reads config.json and the *.safetensors files
(fp32 or bf16, single file or sharded) of each model folder, runs a Llama/Qwen2 forward pass
(RMSNorm, RoPE default/llama3, GQA, optional q/k/v bias, SwiGLU, tied or untied lm_head), and
compares with goldens.json: logits at the first/last prompt position and the greedy tokens
(re-derived by argmax over a full recompute of prompt + greedy tokens). This is also a compact,
readable statement of the math the Java engine has to match.

    python3 tools/verify_goldens_numpy.py gpu-engine/src/test/resources/models/*/
"""

import json
import os
import struct
import sys

import numpy as np


def load_safetensors(model_dir):
    tensors = {}
    for f in sorted(os.listdir(model_dir)):
        if not f.endswith(".safetensors"):
            continue
        with open(os.path.join(model_dir, f), "rb") as fh:
            blob = fh.read()
        n = struct.unpack("<Q", blob[:8])[0]
        header = json.loads(blob[8:8 + n])
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            raw = blob[base + start:base + end]
            if info["dtype"] == "F32":
                a = np.frombuffer(raw, np.float32)
            elif info["dtype"] == "BF16":
                a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                raise ValueError(f"{name}: dtype {info['dtype']} not handled")
            tensors[name] = a.reshape(info["shape"]).astype(np.float32)
    return tensors


def rope_inv_freq(cfg, head_dim):
    rp = cfg.get("rope_parameters")  # transformers 5
    if rp is None:                    # transformers 4.x / original checkpoints
        rp = dict(cfg.get("rope_scaling") or {})
        rp["rope_theta"] = cfg.get("rope_theta", 10000.0)
        rp.setdefault("rope_type", rp.get("type", "default"))
    inv = 1.0 / (rp["rope_theta"] ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    if rp.get("rope_type") == "llama3":
        factor, lo, hi = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
        old = rp["original_max_position_embeddings"]
        wavelen = 2 * np.pi / inv
        scaled = np.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
        inv = np.where(medium, smoothed, scaled)
    elif rp.get("rope_type") not in (None, "default"):
        raise ValueError(f"rope_type {rp.get('rope_type')} not handled")
    return inv.astype(np.float32)


class Model:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = json.load(f)
        self.w = load_safetensors(model_dir)
        c = self.cfg
        self.head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        self.inv_freq = rope_inv_freq(c, self.head_dim)

    def _rms(self, x, weight):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.cfg["rms_norm_eps"]) * weight

    def _rope(self, x, positions):  # x [T, heads, head_dim]; rotate_half convention (HF)
        ang = positions[:, None].astype(np.float32) * self.inv_freq[None, :]
        emb = np.concatenate([ang, ang], -1)
        cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
        half = self.head_dim // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin

    def logits(self, ids):
        c, w = self.cfg, self.w
        n_h, n_kv, hd = c["num_attention_heads"], c["num_key_value_heads"], self.head_dim
        ids = np.asarray(ids)
        t = len(ids)
        pos = np.arange(t)
        mask = np.triu(np.full((t, t), -np.inf, np.float32), 1)
        x = w["model.embed_tokens.weight"][ids]
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."

            def linear(name, inp):
                y = inp @ w[p + name + ".weight"].T
                bias = w.get(p + name + ".bias")
                return y if bias is None else y + bias

            h = self._rms(x, w[p + "input_layernorm.weight"])
            q = self._rope(linear("self_attn.q_proj", h).reshape(t, n_h, hd), pos)
            k = self._rope(linear("self_attn.k_proj", h).reshape(t, n_kv, hd), pos)
            v = linear("self_attn.v_proj", h).reshape(t, n_kv, hd)
            k = np.repeat(k, n_h // n_kv, axis=1)  # GQA: query head i uses kv head i // (n_h / n_kv)
            v = np.repeat(v, n_h // n_kv, axis=1)
            s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            x = x + linear("self_attn.o_proj", np.einsum("hts,shd->thd", s, v).reshape(t, n_h * hd))
            h = self._rms(x, w[p + "post_attention_layernorm.weight"])
            gate, up = linear("mlp.gate_proj", h), linear("mlp.up_proj", h)
            x = x + linear("mlp.down_proj", gate / (1 + np.exp(-gate)) * up)
        x = self._rms(x, w["model.norm.weight"])
        lm_head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
        return x @ lm_head.T


def verify(model_dir, tol=1e-4):
    model = Model(model_dir)
    with open(os.path.join(model_dir, "goldens.json"), encoding="utf-8") as f:
        goldens = json.load(f)
    ok = True
    cases = goldens["cases"] + ([goldens["chat"]] if goldens.get("chat") else [])
    for case in cases:
        prompt = case["input_ids"]
        lg = model.logits(prompt)
        d_first = float(np.abs(lg[0] - np.array(case["logits_first"])).max())
        d_last = float(np.abs(lg[-1] - np.array(case["logits_last"])).max())
        full = prompt + case["greedy_ids"]
        rec = model.logits(full[:-1])[len(prompt) - 1:].argmax(-1)
        agree = int(sum(int(a) == b for a, b in zip(rec, case["greedy_ids"])))
        # A disagreement only counts where the golden margin says the step is not a near-tie.
        bad = [i for i, (a, b) in enumerate(zip(rec, case["greedy_ids"]))
               if int(a) != b and case["greedy_margins"][i] > 1e-3]
        case_ok = d_first < tol and d_last < tol and not bad
        ok &= case_ok
        print(f"  {case.get('id', 'chat'):9s} {len(prompt):4d} tokens  max|dlogit| first {d_first:.1e} "
              f"last {d_last:.1e}  greedy {agree}/{len(case['greedy_ids'])}  {'ok' if case_ok else 'FAIL'}")
    return ok


def main(argv):
    dirs = argv[1:] or [os.path.join("gpu-engine/src/test/resources/models", d)
                        for d in sorted(os.listdir("gpu-engine/src/test/resources/models"))]
    all_ok = True
    for d in dirs:
        print(os.path.basename(os.path.normpath(d)))
        all_ok &= verify(d)
    print("ALL OK" if all_ok else "SOME CHECKS FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
