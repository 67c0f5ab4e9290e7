#!/usr/bin/env python3
"""PyTorch peer of `longsieve bench --fp8` (issue 39; run on the GPU host, same session, before the Java bench).

Measures with CUDA events (median of repeats after warm-up, random data) on the prefill GEMM shapes of
Llama-3.1-8B and Llama-3.1-70B at M = --tokens (fused qkv, o, fused gate/up, down):
  fp8_gemm   "<model> <name> rowwise": torch._scaled_mm(a e4m3 (M, K), w e4m3 (N, K) as (K, N) column-major,
             scale_a (M, 1), scale_b (1, N), out bf16, use_fast_accum=True): per-token x per-channel scales
             with the whole K in the tensor cores' accumulators, the numerics of the engine's gemm_fp8_sm90
             (and of vLLM's CUTLASS FP8 kernels);
             "<model> <name> rowwise exact-accum": the same with use_fast_accum=False (cuBLAS promotes the
             partial sums to f32: slower, closer to f32);
             "<model> <name> tensorwise": one scale per operand, fast accumulation;
             "<model> <name> block128": 1 x 128 activation / 128 x 128 weight block scales where this torch's
             _scaled_mm takes them (left out, with the reason in "errors", where it does not);
  bf16_gemm  "<model> <name>": torch.matmul in bf16 on the same shape (the floor FP8 is to get under);
  fp8_quant  "<model> <name> rowwise": per-token dynamic quantization of the (M, K) bf16 input in PyTorch
             (amax, divide, clamp, cast): what an eager FP8 linear pays before _scaled_mm;
  ceilings   fp8_matmul_tflops: an 8192^3 _scaled_mm (tensorwise, fast accumulation).
Writes JSON (--out); with --merge-into PEER.json adds these keys to tools/bench_torch_peer.py's file, so one
--peer file serves `longsieve bench --fp8` and the other sections. A row that fails is left out with the
reason in "errors"; the script goes on.

    python3 tools/bench_torch_peer.py --out bench/peer.json
    python3 tools/bench_fp8_peer.py --merge-into bench/peer.json
    longsieve bench --fp8 --skip-dense --peer bench/peer.json --csv bench/fp8.csv

Runtime on an H200: about 30-60 s.
"""
import argparse
import json
import os
import statistics

SHAPES = {  # (dim, hidden, heads, kv heads, head_dim)
    "8b": (4096, 14336, 32, 8, 128),
    "70b": (8192, 28672, 64, 8, 128),
}
FP8_MAX = 448.0


def layer_gemms(model):
    dim, hidden, heads, kv, hd = SHAPES[model]
    return [("qkv", heads * hd + 2 * kv * hd, dim), ("o", dim, heads * hd), ("gate_up", 2 * hidden, dim),
            ("down", dim, hidden)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="JSON to write (default: the --merge-into file)")
    ap.add_argument("--merge-into", help="an existing peer JSON (tools/bench_torch_peer.py) to add these keys to")
    ap.add_argument("--tokens", type=int, default=4096)
    args = ap.parse_args()
    if not args.out and not args.merge_into:
        ap.error("give --out or --merge-into")
    import torch

    dev = torch.device("cuda")
    f8 = torch.float8_e4m3fn

    def median_ms(fn, warm=3, reps=15):
        for _ in range(warm):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return statistics.median(times)

    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "tokens": args.tokens,
           "ceilings": {}, "fp8_gemm": {}, "bf16_gemm": {}, "fp8_quant": {}, "errors": {}}

    def attempt(group, key, fn):
        try:
            res[group][key] = fn()
        except Exception as e:  # noqa: BLE001 - one failed row must not end the run
            res["errors"][f"{group}/{key}"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        torch.cuda.empty_cache()

    def rand_fp8(rows, cols):
        return (torch.randn(rows, cols, device=dev) * 64).clamp(-FP8_MAX, FP8_MAX).to(f8)

    one = torch.ones((), device=dev, dtype=torch.float32)
    a8, w8 = rand_fp8(8192, 8192), rand_fp8(8192, 8192)
    ms = median_ms(lambda: torch._scaled_mm(a8, w8.t(), one, one, out_dtype=torch.bfloat16, use_fast_accum=True))
    res["ceilings"]["fp8_matmul_tflops"] = 2 * 8192 ** 3 / ms / 1e9
    del a8, w8
    M = args.tokens
    for model in SHAPES:
        for name, n, k in layer_gemms(model):
            key = f"{model} {name}"
            x = torch.randn(M, k, device=dev, dtype=torch.bfloat16)
            a8, w8 = rand_fp8(M, k), rand_fp8(n, k)
            sa = torch.rand(M, 1, device=dev, dtype=torch.float32) + 0.5
            sw = torch.rand(1, n, device=dev, dtype=torch.float32) + 0.5
            attempt("fp8_gemm", key + " rowwise", lambda: median_ms(lambda: torch._scaled_mm(
                a8, w8.t(), sa, sw, out_dtype=torch.bfloat16, use_fast_accum=True)))
            attempt("fp8_gemm", key + " rowwise exact-accum", lambda: median_ms(lambda: torch._scaled_mm(
                a8, w8.t(), sa, sw, out_dtype=torch.bfloat16, use_fast_accum=False)))
            attempt("fp8_gemm", key + " tensorwise", lambda: median_ms(lambda: torch._scaled_mm(
                a8, w8.t(), one, one, out_dtype=torch.bfloat16, use_fast_accum=True)))
            # blockwise scales: (M, K/128) for a (outer-dim-major) and (K/128, N/128) for w, in the layout this
            # torch's _scaled_mm documents for 1x128 x 128x128 scaling (torch >= 2.9 on sm_90)
            sab = (torch.rand(k // 128, M, device=dev) + 0.5).t()
            swb = (torch.rand(n // 128, k // 128, device=dev) + 0.5).t()
            attempt("fp8_gemm", key + " block128", lambda: median_ms(lambda: torch._scaled_mm(
                a8, w8.t(), sab, swb, out_dtype=torch.bfloat16)))
            wb = torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02
            attempt("bf16_gemm", key, lambda: median_ms(lambda: torch.matmul(x, wb.t())))

            def quant():
                s = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / FP8_MAX
                return (x.float() / s).clamp(-FP8_MAX, FP8_MAX).to(f8), s
            attempt("fp8_quant", key + " rowwise", lambda: median_ms(quant))
            del x, a8, w8, wb, sa, sw, sab, swb
            torch.cuda.empty_cache()

    out = args.out or args.merge_into
    merged = {}
    if args.merge_into and os.path.isfile(args.merge_into):
        with open(args.merge_into) as f:
            merged = json.load(f)
    ceilings = merged.get("ceilings", {})
    ceilings.update(res.pop("ceilings"))
    merged.update(res)
    merged["ceilings"] = ceilings
    with open(out, "w") as f:
        json.dump(merged, f, indent=1)
    print(f"wrote {out}: fp8 ceiling {ceilings['fp8_matmul_tflops']:.0f} TFLOP/s")
    for key, ms in res["fp8_gemm"].items():
        model, name = key.split(" ")[:2]
        n, k = {nm: (nn, kk) for nm, nn, kk in layer_gemms(model)}[name]
        print(f"  {key:32s} {M}x{n}x{k}: {ms:.3f} ms, {2 * M * n * k / ms / 1e9:.0f} TFLOP/s")
    for key, ms in res["bf16_gemm"].items():
        print(f"  bf16 {key:27s}: {ms:.3f} ms")
    for key, why in res["errors"].items():
        print(f"  failed {key}: {why}")


if __name__ == "__main__":
    main()
