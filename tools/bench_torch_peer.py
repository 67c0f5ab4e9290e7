#!/usr/bin/env python3
"""PyTorch peer for `longsieve bench` (run on the GPU host, same session, before the Java bench).

Measures, with CUDA events (median of repeats after warm-up, random data, never zeros):
  ceilings      device-to-device copy (bytes read + written per second) and an 8192^3 bf16 matmul
  gemm          torch.matmul on the prefill GEMM shapes of Llama-3.1-8B (M = --tokens)
  gemv          torch.matmul at batch 1 on the same weight shapes (+ the LM head)
  sdpa_prefill  F.scaled_dot_product_attention, flash backend, causal, GQA 32/8 heads, d 128, per context
  sdpa_decode   the same with one query over a cache of L tokens
and writes them as JSON (--out) for `longsieve bench --peer`, plus a table on stdout.

    python3 tools/bench_torch_peer.py --out bench/peer.json --contexts 8192,32768,65536,131072
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DIM, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 4096, 14336, 32, 8, 128, 128256


def median_ms(fn, warm=3, reps=15, inner=1):
    """Median over reps of the time per call, each sample timing `inner` back-to-back calls (as the
    Java bench does for short kernels, so launch overhead overlaps the GPU)."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / inner)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--contexts", default="8192,32768,65536,131072")
    args = ap.parse_args()
    contexts = [int(x) for x in args.contexts.split(",")]
    dev = torch.device("cuda")
    torch.manual_seed(0)
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "ceilings": {}, "gemm": {}, "gemv": {},
           "sdpa_prefill": {}, "sdpa_decode": {}}

    n = 1 << 30  # 2 GiB of bf16
    src = torch.randn(n, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), 2, 9)
    res["ceilings"]["copy_gbps"] = 2 * src.numel() * 2 / ms / 1e6
    del src, dst
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    ms = median_ms(lambda: torch.matmul(a, b), 3, 10)
    res["ceilings"]["matmul_tflops"] = 2 * 8192 ** 3 / ms / 1e9
    del a, b

    shapes = {"qkv": (HEADS * HEAD_DIM + 2 * KV_HEADS * HEAD_DIM, DIM), "o": (DIM, HEADS * HEAD_DIM),
              "gate_up": (2 * HIDDEN, DIM), "down": (DIM, HIDDEN), "lm_head": (VOCAB, DIM)}
    for name, (nout, k) in shapes.items():
        w = torch.randn(nout, k, device=dev, dtype=torch.bfloat16) * 0.02
        if name != "lm_head":
            x = torch.randn(args.tokens, k, device=dev, dtype=torch.bfloat16)
            res["gemm"][name] = median_ms(lambda: torch.matmul(x, w.t()))
        x1 = torch.randn(1, k, device=dev, dtype=torch.bfloat16)
        # rotate over weight copies so back-to-back calls miss the 60 MB L2 (as the Java bench does)
        copies = [w] + [torch.randn_like(w) * 0.02 for _ in range(max(0, min(7, (512 << 20) // (nout * k * 2) - 1)))]
        turn = [0]

        def gemv():
            turn[0] += 1
            return torch.matmul(x1, copies[turn[0] % len(copies)].t())

        res["gemv"][name] = median_ms(gemv, 5, 15, 20)
        del w, copies

    for L in contexts:
        q = torch.randn(1, HEADS, L, HEAD_DIM, device=dev, dtype=torch.bfloat16)
        kk = torch.randn(1, KV_HEADS, L, HEAD_DIM, device=dev, dtype=torch.bfloat16)
        vv = torch.randn(1, KV_HEADS, L, HEAD_DIM, device=dev, dtype=torch.bfloat16)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            res["sdpa_prefill"][str(L)] = median_ms(
                lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=True, enable_gqa=True), 1,
                3 if L >= 65536 else 5)
        q1 = q[:, :, -1:, :].contiguous()
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
            res["sdpa_decode"][str(L)] = median_ms(
                lambda: F.scaled_dot_product_attention(q1, kk, vv, enable_gqa=True), 3, 15, 20)
        del q, kk, vv, q1
        torch.cuda.empty_cache()

    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    c = res["ceilings"]
    print(f"peer on {res['device']}, torch {res['torch']}: copy {c['copy_gbps']:.0f} GB/s, "
          f"matmul {c['matmul_tflops']:.0f} TFLOP/s")
    for name, ms in res["gemm"].items():
        nout, k = shapes[name]
        print(f"  gemm {name:8s} {args.tokens}x{nout}x{k}: {ms:.3f} ms, {2 * args.tokens * nout * k / ms / 1e9:.0f} TFLOP/s")
    for name, ms in res["gemv"].items():
        nout, k = shapes[name]
        print(f"  gemv {name:8s} 1x{nout}x{k}: {ms:.4f} ms, {nout * k * 2 / ms / 1e6:.0f} GB/s")
    for L in contexts:
        p, d = res["sdpa_prefill"][str(L)], res["sdpa_decode"][str(L)]
        flops = 4 * HEADS * HEAD_DIM * L * (L + 1) / 2
        print(f"  sdpa L={L}: prefill {p:.2f} ms ({flops / p / 1e9:.0f} TFLOP/s), decode {d * 1000:.1f} us "
              f"({2 * L * KV_HEADS * HEAD_DIM * 2 / d / 1e6:.0f} GB/s)")


if __name__ == "__main__":
    main()
