#!/usr/bin/env python3
"""What the CUDA engine's bf16 rounding alone does to the tiny checkpoints' logits (numpy, no GPU).

The GPU forward pass (gpu-engine/.../cuda/CudaModel) keeps the residual stream in f32 and
accumulates every product in f32, but rounds to bf16: the weights, each matmul input (normed
activations, attention output, silu(gate)*up), q, k (rotated) and v as stored in the KV cache, and
the gate/up outputs. This script replays exactly those roundings on top of the plain numpy pass of
tools/verify_goldens_numpy.py and reports, per prompt of every tiny model:
  - the relative logit error (||gpu - ref|| / ||ref||) at prefill and at the first decode step, the
    numbers ForwardParityTest's tolerance is set from (on an H200 the measured prefill errors equal
    these to three digits);
  - how many of the 40 teacher-forced greedy steps have a reference top-1/top-2 margin above twice
    the largest logit error, and whether the emulated pick differs on any of them.

    python3 tools/emulate_gpu_bf16.py [model dirs...]
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verify_goldens_numpy import Model  # noqa: E402


def bf16(a):
    """Round-to-nearest-even to bf16, kept as float32."""
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32)).view(np.float32)


class Emulated(Model):
    def __init__(self, model_dir, gpu):
        super().__init__(model_dir)
        self.r = bf16 if gpu else (lambda a: a)
        if gpu:
            self.w = {k: (bf16(v) if v.ndim == 2 else v) for k, v in self.w.items()}

    def logits(self, ids):
        c, w, r = self.cfg, self.w, self.r
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
                b = w.get(p + name + ".bias")
                return y if b is None else y + b

            h = r(self._rms(x, w[p + "input_layernorm.weight"]))
            q = r(self._rope(linear("self_attn.q_proj", h).reshape(t, n_h, hd), pos))
            k = r(self._rope(linear("self_attn.k_proj", h).reshape(t, n_kv, hd), pos))
            v = r(linear("self_attn.v_proj", h).reshape(t, n_kv, hd))
            k, v = np.repeat(k, n_h // n_kv, 1), np.repeat(v, n_h // n_kv, 1)
            s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            x = x + linear("self_attn.o_proj", r(np.einsum("hts,shd->thd", s, v).reshape(t, n_h * hd)))
            h = r(self._rms(x, w[p + "post_attention_layernorm.weight"]))
            g, u = r(linear("mlp.gate_proj", h)), r(linear("mlp.up_proj", h))
            x = x + linear("mlp.down_proj", r(g / (1 + np.exp(-g)) * u))
        x = r(self._rms(x, w["model.norm.weight"]))
        head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
        return x @ head.T


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main(argv):
    root = "gpu-engine/src/test/resources/models"
    dirs = argv[1:] or [os.path.join(root, d) for d in sorted(os.listdir(root))]
    for d in dirs:
        ref, gpu = Emulated(d, False), Emulated(d, True)
        with open(os.path.join(d, "goldens.json"), encoding="utf-8") as f:
            g = json.load(f)
        for case in g["cases"] + ([g["chat"]] if g.get("chat") else []):
            ids, gold, margins = list(case["input_ids"]), case["greedy_ids"], case["greedy_margins"]
            seq = ids + gold
            lg, lr = gpu.logits(seq[:-1])[len(ids) - 1:], ref.logits(seq[:-1])[len(ids) - 1:]
            tie = 2 * float(np.abs(lg[0] - lr[0]).max())
            steps = [s for s in range(len(gold)) if margins[s] >= tie]
            bad = [s for s in steps if int(lg[s].argmax()) != gold[s]]
            print(f"{os.path.basename(os.path.normpath(d))}/{case.get('id', 'chat')}: prefill {rel(lg[0], lr[0]):.4f} "
                  f"decode {rel(lg[1], lr[1]):.4f}  greedy comparable {len(steps)}/{len(gold)} (margin >= {tie:.3f}), "
                  f"differing {bad}")


if __name__ == "__main__":
    main(sys.argv)
