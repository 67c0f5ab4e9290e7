#!/usr/bin/env python3
"""The FP8 floors of an engine run (issue 39: "a 70B-shaped FP8 checkpoint runs a 128K document on one H200;
its prefill s and decode ms/token against its FP8 floors"), from the engine's --stats-json lines and the
ceilings of the peer file (tools/bench_torch_peer.py + tools/bench_fp8_peer.py --merge-into):

  prefill floor  = linear FLOPs / FP8 matmul ceiling + causal attention FLOPs / bf16 matmul ceiling
                   (the weights' products run on FP8 tensor cores; attention stays bf16)
                   linear = 2 * (layer weights) * L + 2 * vocab * dim (the LM head on the last row)
                   attention = 2 * 2 * L^2 / 2 * heads * head_dim * layers
  decode floor   = bytes one step reads / copy ceiling: FP8 layer weights (1 B each) + the bf16 LM head +
                   the KV cache read by dense attention (K and V, bf16, at the document's length)

    python3 tools/gpu_host/fp8_floors.py --shape 70b --stats OUT/e2e70b.jsonl --peer OUT/peer.json
"""
import argparse
import json

SHAPES = {  # dim, hidden, layers, heads, kv heads, head_dim, vocab
    "8b": (4096, 14336, 32, 32, 8, 128, 128256),
    "70b": (8192, 28672, 80, 64, 8, 128, 128256),
}


def layer_weights(shape):
    dim, hidden, layers, heads, kv, hd, _ = SHAPES[shape]
    return layers * (dim * heads * hd + 2 * dim * kv * hd + heads * hd * dim + 3 * dim * hidden)


def floors(shape, L, fp8_tflops, bf16_tflops, copy_gbps):
    dim, hidden, layers, heads, kv, hd, vocab = SHAPES[shape]
    linear = 2.0 * layer_weights(shape) * L + 2.0 * vocab * dim
    attention = 2 * 2 * (L * L / 2) * heads * hd * layers
    prefill_s = linear / (fp8_tflops * 1e12) + attention / (bf16_tflops * 1e12)
    step_bytes = layer_weights(shape) + 2.0 * vocab * dim + 2 * layers * kv * hd * 2.0 * L
    decode_ms = step_bytes / (copy_gbps * 1e9) * 1e3
    return prefill_s, decode_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--stats", required=True, help="the engine's --stats-json file")
    ap.add_argument("--peer", required=True, help="peer JSON with ceilings copy_gbps, matmul_tflops, fp8_matmul_tflops")
    args = ap.parse_args()
    with open(args.peer) as f:
        c = json.load(f)["ceilings"]
    fp8, bf16, copy = c["fp8_matmul_tflops"], c["matmul_tflops"], c["copy_gbps"]
    print(f"ceilings: FP8 {fp8:.0f} TFLOP/s, bf16 {bf16:.0f} TFLOP/s, copy {copy:.0f} GB/s")
    with open(args.stats) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            L = r["input_tokens"]
            pf, dm = floors(args.shape, L, fp8, bf16, copy)
            prefill_s = r["prefill_ms"] / 1e3
            decode = r.get("decode_ms_per_token")
            print(f"{args.shape} L={L}: prefill {prefill_s:.2f} s vs floor {pf:.2f} s ({prefill_s / pf:.2f}x); "
                  f"decode {decode:.1f} ms/token vs floor {dm:.1f} ms ({decode / dm:.2f}x)" if decode else
                  f"{args.shape} L={L}: prefill {prefill_s:.2f} s vs floor {pf:.2f} s ({prefill_s / pf:.2f}x)")


if __name__ == "__main__":
    main()
