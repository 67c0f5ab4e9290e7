#!/usr/bin/env python3
"""Writes an FP8 checkpoint for the issue-39 end-to-end runs, on the GPU host, with transformers' own FP8
quantizer (transformers.integrations.finegrained_fp8.Fp8Quantize: 128 x 128 blocks, fp32 weight_scale_inv,
the "fp8" format transformers and vLLM read), tensor by tensor on the GPU so neither the host nor the GPU
ever holds the whole model:

  --from DIR      quantize an existing bf16 checkpoint (e.g. bench_e2e.py's random Llama-3.1-8B at
                  /tmp/longsieve-e2e-llama8b): the same weights, so the FP8 engine's tokens can be compared
                  with the bf16 engine's (tools/gpu_host/fp8_agreement.py)
  --shape 70b     random weights of Llama-3.1-70B's shapes (80 layers, 8192 wide, 28672 hidden, 64/8 heads,
                  vocab 128256; N(0, 0.02) as LlamaForCausalLM initialises them), made on the GPU layer by layer;
                  --layers N writes fewer layers (a quick check); --shape 8b likewise for the 8B shapes

Every *_proj.weight becomes float8_e4m3fn with its weight_scale_inv; embeddings, norms and lm_head stay bf16
(lm_head as transformers' FP8 quantizer keeps it, modules_to_not_convert); config.json carries
quantization_config {quant_method fp8, weight_block_size [128, 128], activation_scheme dynamic}; shards of
about 5 GB with model.safetensors.index.json; --from copies the tokenizer, --shape writes bench_e2e.py's
word-level tokenizer over the 128,256 ids. --scheme channel writes the compressed-tensors format instead
(per-channel bf16 weight_scale, dynamic per-token activations, ignore [lm_head]: what llm-compressor's
FP8_DYNAMIC scheme writes), quantized as tools/make_fp8_checkpoints.py does.

Sizes: 8B ~ 9 GB, 70B ~ 72 GB (68.5 G FP8 weights + 4.2 GB bf16 embeddings and LM head): the 70B folder
needs a disk of ~80 GB (the 1-GPU H200 machine has 64 GiB: use the x2 machine's disk, or /dev/shm on a
host with the memory). Writing is bound by the disk: ~2-4 minutes for 70B on NVMe.

    python3 tools/gpu_host/make_fp8_checkpoint.py --from /tmp/longsieve-e2e-llama8b --out /tmp/longsieve-e2e-llama8b-fp8
    python3 tools/gpu_host/make_fp8_checkpoint.py --shape 70b --out /dev/shm/llama70b-fp8

Then the engine runs it as any checkpoint (it keeps the weights FP8 on an H100/H200):
    build/bundle/longsieve-gpu generate --model /dev/shm/llama70b-fp8 --device cuda --prompt-ids doc-128k.ids \\
        --max-new-tokens 64 --ignore-eos --prefill-chunk 4096 --stats-json /tmp/fp8-70b.jsonl
and bench_e2e.py compares it with HF transformers (bf16, the original folder) through --engine-ckpt.
"""
import argparse
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SHAPES = {  # dim, hidden, layers, heads, kv heads, head_dim, vocab
    "8b": (4096, 14336, 32, 32, 8, 128, 128256),
    "70b": (8192, 28672, 80, 64, 8, 128, 128256),
    "tiny": (256, 512, 2, 4, 2, 64, 1024),  # a smoke test of this script (--device cpu)
}
SHARD_BYTES = 5 << 30
FP8_MAX = 448.0
MARKER = "longsieve-fp8.json"


def log(msg):
    print(f"[fp8-ckpt {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def quant_config(scheme):
    if scheme == "block":
        return {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
                "modules_to_not_convert": ["lm_head"]}
    weights = {"type": "float", "num_bits": 8, "strategy": "channel", "dynamic": False, "symmetric": True}
    inputs = {"type": "float", "num_bits": 8, "strategy": "token", "dynamic": True, "symmetric": True}
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": inputs}},
            "ignore": ["lm_head"], "kv_cache_scheme": None}


def quantize(name, w, scheme, quantizer):
    """{name: tensor} for one weight: FP8 + scale for a *_proj.weight, else the bf16 tensor as it is."""
    import torch
    if not name.endswith("_proj.weight"):
        return {name: w.to(torch.bfloat16)}
    if scheme == "block":
        return quantizer._quantize_one(name, w)  # transformers' own: e4m3 + fp32 weight_scale_inv
    wb = w.to(torch.bfloat16).float()
    scale = (wb.abs().amax(dim=1, keepdim=True) / FP8_MAX).clamp(min=1e-12).to(torch.bfloat16)
    q = torch.clamp(wb / scale.float(), -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return {name: q, name[:-len(".weight")] + ".weight_scale": scale}


class ShardWriter:
    """Collects tensors on the host and writes ~5 GB safetensors shards plus the index."""

    def __init__(self, out):
        self.out, self.cur, self.cur_bytes, self.files, self.weight_map, self.total = out, {}, 0, [], {}, 0

    def add(self, tensors):
        for k, v in tensors.items():
            v = v.detach().to("cpu").contiguous()
            self.cur[k] = v
            self.cur_bytes += v.numel() * v.element_size()
            self.total += v.numel() * v.element_size()
        if self.cur_bytes >= SHARD_BYTES:
            self.flush()

    def flush(self):
        from safetensors.torch import save_file
        if not self.cur:
            return
        fname = f"model-{len(self.files) + 1:05d}.safetensors"
        save_file(self.cur, os.path.join(self.out, fname), metadata={"format": "pt"})
        for k in self.cur:
            self.weight_map[k] = fname
        self.files.append(fname)
        log(f"wrote {fname} ({self.cur_bytes / 1e9:.1f} GB)")
        self.cur, self.cur_bytes = {}, 0

    def finish(self):
        self.flush()
        with open(os.path.join(self.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": self.total}, "weight_map": dict(sorted(self.weight_map.items()))}, f,
                      indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--from", dest="src", help="a bf16 checkpoint folder to quantize")
    src.add_argument("--shape", choices=sorted(SHAPES), help="random weights of these shapes")
    ap.add_argument("--out", required=True)
    ap.add_argument("--scheme", choices=["block", "channel"], default="block")
    ap.add_argument("--layers", type=int, help="with --shape: fewer layers than the model has")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda", help="where to quantize (cpu: a smoke test without a GPU)")
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import FineGrainedFP8Config, LlamaConfig
    from transformers.integrations.finegrained_fp8 import Fp8Quantize

    class Holder:  # what Fp8Quantize reads from its quantizer
        quantization_config = FineGrainedFP8Config(weight_block_size=[128, 128])
    quantizer = Fp8Quantize(Holder())
    if os.path.exists(args.out) and os.listdir(args.out):
        raise SystemExit(f"{args.out} is not empty: pick another --out")
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    dev = torch.device(args.device)
    writer = ShardWriter(args.out)
    if args.src:
        from safetensors import safe_open
        index = os.path.join(args.src, "model.safetensors.index.json")
        files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.isfile(index) else ["model.safetensors"]
        for fname in files:
            with safe_open(os.path.join(args.src, fname), framework="pt", device=args.device) as f:
                for name in f.keys():
                    writer.add(quantize(name, f.get_tensor(name), args.scheme, quantizer))
        with open(os.path.join(args.src, "config.json")) as f:
            config = json.load(f)
        for extra in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            if os.path.isfile(os.path.join(args.src, extra)):
                shutil.copy(os.path.join(args.src, extra), os.path.join(args.out, extra))
    else:
        import bench_e2e as E
        dim, hidden, layers, heads, kv, hd, vocab = SHAPES[args.shape]
        layers = args.layers or layers
        cfg = LlamaConfig(hidden_size=dim, intermediate_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                          num_key_value_heads=kv, head_dim=hd, vocab_size=vocab, max_position_embeddings=E.MAX_POS,
                          rms_norm_eps=1e-5, bos_token_id=E.BOS, eos_token_id=[E.EOS, E.EOT], tie_word_embeddings=False,
                          initializer_range=0.02, **E.rope_kwargs(LlamaConfig))
        g = torch.Generator(device=dev).manual_seed(args.seed)

        def rnd(*shape):
            return torch.randn(*shape, generator=g, device=dev, dtype=torch.float32).mul_(0.02).to(torch.bfloat16)
        writer.add({"model.embed_tokens.weight": rnd(vocab, dim)})
        for i in range(layers):
            p = f"model.layers.{i}."
            parts = {p + "self_attn.q_proj.weight": (heads * hd, dim), p + "self_attn.k_proj.weight": (kv * hd, dim),
                     p + "self_attn.v_proj.weight": (kv * hd, dim), p + "self_attn.o_proj.weight": (dim, heads * hd),
                     p + "mlp.gate_proj.weight": (hidden, dim), p + "mlp.up_proj.weight": (hidden, dim),
                     p + "mlp.down_proj.weight": (dim, hidden)}
            for name, shape in parts.items():
                writer.add(quantize(name, rnd(*shape), args.scheme, quantizer))
            writer.add({p + "input_layernorm.weight": torch.ones(dim, device=dev, dtype=torch.bfloat16),
                        p + "post_attention_layernorm.weight": torch.ones(dim, device=dev, dtype=torch.bfloat16)})
            if i % 10 == 0:
                log(f"layer {i} of {layers} quantized ({time.time() - t0:.0f} s)")
        writer.add({"model.norm.weight": torch.ones(dim, device=dev, dtype=torch.bfloat16), "lm_head.weight": rnd(vocab, dim)})
        config = cfg.to_dict()
        config["dtype"] = "bfloat16"
        E.write_tokenizer(args.out)
    writer.finish()
    config["quantization_config"] = quant_config(args.scheme)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(args.out, MARKER), "w") as f:
        json.dump({"from": args.src, "shape": args.shape, "layers": args.layers, "scheme": args.scheme, "seed": args.seed,
                   "bytes": writer.total, "shards": writer.files, "seconds": time.time() - t0,
                   "transformers": transformers.__version__, "torch": torch.__version__}, f, indent=1)
    log(f"done: {writer.total / 1e9:.1f} GB in {len(writer.files)} shards, {time.time() - t0:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
