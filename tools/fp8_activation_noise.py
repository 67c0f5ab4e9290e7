#!/usr/bin/env python3
"""Expected logit error of FP8 activations: the tiny FP8 checkpoints' weights dequantized to fp32 (the CPU
reference), run once with fp32 activations and once with each quantized Linear's input rounded to e4m3 as the
checkpoint's scheme says (per token / per 128-group dynamic, or the static per-tensor input_scale). Everything
else stays fp32, so the figure is what FP8 activations alone cost on these models: the floor under
Fp8ForwardParityTest's tolerance (the GPU adds its bf16 path on top). Needs torch, transformers and safetensors
(a throw-away venv, not a CI dependency):
    python3 tools/fp8_activation_noise.py gpu-engine/src/test/resources/models
2026-12-05, torch 2.13 CPU, transformers 5.18: 0.089-0.149 (fp8-*), 0.107-0.186 (ct-tensor, ct-channel),
0.109 / 0.244 (ct-block128 short / long); the H100 run of the test measured 0.07-0.29 against the CPU."""
import json, sys, torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM
root = sys.argv[1] if len(sys.argv) > 1 else "gpu-engine/src/test/resources/models"
def rel(a, b): return ((a - b).norm() / b.norm()).item()
def q_e4m3(x, scale): return (x / scale).clamp(-448, 448).to(torch.float8_e4m3fn).float() * scale
for name in ["fp8-block128", "fp8-tensor", "ct-channel", "ct-tensor", "ct-block128"]:
    d = f"{root}/{name}"
    cfg = json.load(open(f"{d}/config.json")); qc = cfg.pop("quantization_config")
    t = load_file(f"{d}/model.safetensors")
    sd, schemes = {}, {}
    for k, v in t.items():
        if k.endswith(".weight") and v.dtype == torch.float8_e4m3fn:
            base = k[:-len(".weight")]
            s = t.get(base + ".weight_scale_inv", t.get(base + ".weight_scale")).float()
            w = v.float()
            if s.numel() == 1: w = w * s
            elif s.shape[0] == w.shape[0] and s.numel() == w.shape[0]: w = w * s.reshape(-1, 1)
            else:  # blocks
                bs = 128; w = w * s.repeat_interleave(bs, 0)[:w.shape[0]].repeat_interleave(bs, 1)[:, :w.shape[1]]
            sd[k] = w; schemes[base] = t.get(base + ".input_scale", t.get(base + ".activation_scale"))
        elif not (k.endswith("_scale") or k.endswith("_scale_inv")):
            sd[k] = v.float()
    if qc["quant_method"] == "fp8":
        act = "static" if qc.get("activation_scheme") == "static" else ("group" if qc.get("weight_block_size") else "token")
    else:
        g = list(qc["config_groups"].values())[0]["input_activations"]; act = g["strategy"] if g["dynamic"] else "static"
    m = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in cfg.items() if k not in ("architectures",)})).float().eval()
    missing = m.load_state_dict(sd, strict=False)
    def hook(base):
        def pre(mod, args):
            x = args[0]
            if act == "static": s = schemes[base].float()
            elif act == "token": s = x.abs().amax(-1, keepdim=True).clamp_min(1e-12) / 448
            else:
                xs = x.reshape(*x.shape[:-1], -1, 128); s = xs.abs().amax(-1, keepdim=True).clamp_min(1e-12) / 448
                return (q_e4m3(xs, s).reshape(x.shape),)
            return (q_e4m3(x, s),)
        return pre
    g = json.load(open(f"{d}/goldens.json"))
    for c in g["cases"]:
        ids = torch.tensor([c["input_ids"]])
        with torch.no_grad():
            ref = m(ids).logits[0, -1]
            hs = [dict(m.named_modules())[b].register_forward_pre_hook(hook(b)) for b in schemes]
            got = m(ids).logits[0, -1]
            for h in hs: h.remove()
        print(f"{name}/{c['id']} ({len(c['input_ids'])} tokens, activations {act}): FP8 activations vs fp32 activations, logits rel err {rel(got, ref):.4f}")
