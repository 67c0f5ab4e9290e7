#!/usr/bin/env python3
"""PyTorch peer for `longsieve bench` (run on the GPU host, same session, before the Java bench).

Measures, with CUDA events (median of repeats after warm-up, random data, never zeros):
  ceilings            device-to-device copy (bytes read + written per second) and an 8192^3 bf16 matmul
  gemm                torch.matmul on the prefill GEMM shapes of Llama-3.1-8B (M = --tokens): fused qkv,
                      o, fused gate/up, down
  gemm_residual       o and down as the engine runs them: an f32 residual stream += x W^T (matmul, then add_)
  lm_head_rows        torch.matmul of the LM head (128256 x 4096) on the last M rows, M = 1, 4, 16
  gemv                torch.matmul at batch 1 on the same weight shapes (+ the LM head)
  sdpa_prefill        F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True) with
                      PyTorch's DEFAULT backend choice (no sdpa_kernel context: cuDNN on an H200 with
                      torch 2.11), GQA 32/8 heads, head_dim 128, per context
  sdpa_prefill_flash  the same forced to the flash backend (what this script measured before issue 15)
  sdpa_prefill_d64, sdpa_prefill_flash_d64   the same two at head_dim 64 (32/8 heads of 64)
  sdpa_backend        per head_dim, the backend the default choice ran, read once from the torch
                      profiler's kernel names at a short context ("cudnn", "flash", "efficient", "math")
  sdpa_decode         one query over a cache of L tokens (flash or efficient backend)
and writes them as JSON (--out) for `longsieve bench --peer`, plus a table on stdout. The Java bench
takes, for its prefill attention rows, the faster of sdpa_prefill and sdpa_prefill_flash: the fastest
of what PyTorch gives by default. A row that fails (backend unsupported, out of memory) is left out of
the JSON with the reason in "errors"; the script goes on.

    python3 tools/bench_torch_peer.py --out bench/peer.json --contexts 8192,32768,65536,131072

Runtime on an H200: about 60-90 s (one 128K SDPA call is ~250 ms default, ~420 ms flash; repeats are
1 warm-up + 3 from 64K on).
"""
import argparse
import json
import statistics
import sys
import time

DIM, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 4096, 14336, 32, 8, 128, 128256
LM_HEAD_ROWS = (1, 4, 16)


def prefill_reps(L):
    """(warm-up, repeats) of one prefill SDPA call at context L: few at long contexts (~0.25-0.45 s a call at 128K)."""
    if L >= 65536:
        return 1, 3
    if L >= 16384:
        return 2, 5
    return 3, 10


def backend_of(kernel_names):
    """The SDPA backend a list of CUDA kernel names came from (cuDNN's names also hold "flash", so it goes first)."""
    low = " ".join(kernel_names).lower()
    if "cudnn" in low or "fort_native_sdpa" in low:
        return "cudnn"
    if "flash" in low:
        return "flash"
    if "fmha" in low or "efficient" in low or "cutlass" in low:
        return "efficient"
    if "gemm" in low or "softmax" in low:
        return "math"
    return "unknown"


def attention_flops(L, heads, head_dim):
    """Causal prefill attention over L tokens: QK^T and PV, L(L+1)/2 pairs per head, 2 FLOPs a multiply-add."""
    return 4.0 * heads * head_dim * L * (L + 1) / 2


def main():
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

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

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--contexts", default="8192,32768,65536,131072")
    ap.add_argument("--head-dims", default="128,64", help="head sizes of the prefill SDPA rows (32/8 heads each)")
    args = ap.parse_args()
    contexts = [int(x) for x in args.contexts.split(",") if x]
    head_dims = [int(x) for x in args.head_dims.split(",") if x]
    dev = torch.device("cuda")
    torch.manual_seed(0)
    t_start = time.time()
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "ceilings": {}, "gemm": {}, "gemm_residual": {},
           "lm_head_rows": {}, "gemv": {}, "sdpa_prefill": {}, "sdpa_prefill_flash": {}, "sdpa_prefill_d64": {},
           "sdpa_prefill_flash_d64": {}, "sdpa_backend": {}, "sdpa_decode": {}, "errors": {}}

    def attempt(group, key, fn):
        """res[group][key] = fn(), or the error under errors (the run goes on)."""
        try:
            res[group][key] = fn()
        except Exception as e:  # noqa: BLE001 - one row's failure must not end the run
            res["errors"][f"{group}/{key}"] = f"{type(e).__name__}: {e}"[:300]
            print(f"  {group}/{key} failed: {e}", file=sys.stderr, flush=True)
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

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
    print(f"ceilings done ({time.time() - t_start:.0f} s)", flush=True)

    shapes = {"qkv": (HEADS * HEAD_DIM + 2 * KV_HEADS * HEAD_DIM, DIM), "o": (DIM, HEADS * HEAD_DIM),
              "gate_up": (2 * HIDDEN, DIM), "down": (DIM, HIDDEN), "lm_head": (VOCAB, DIM)}
    for name, (nout, k) in shapes.items():
        w = torch.randn(nout, k, device=dev, dtype=torch.bfloat16) * 0.02
        if name != "lm_head":
            x = torch.randn(args.tokens, k, device=dev, dtype=torch.bfloat16)
            res["gemm"][name] = median_ms(lambda: torch.matmul(x, w.t()))
            if name in ("o", "down"):  # what the engine's fused epilogue does: an f32 residual stream += x W^T
                r = torch.randn(args.tokens, nout, device=dev, dtype=torch.float32)
                res["gemm_residual"][name] = median_ms(lambda: r.add_(torch.matmul(x, w.t())))
                del r
            del x
        else:
            for m in LM_HEAD_ROWS:  # prefill's last rows only go through the LM head
                xm = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                res["lm_head_rows"][str(m)] = median_ms(lambda: torch.matmul(xm, w.t()), 5, 15, 10)
        x1 = torch.randn(1, k, device=dev, dtype=torch.bfloat16)
        # rotate over weight copies so back-to-back calls miss the 60 MB L2 (as the Java bench does)
        copies = [w] + [torch.randn_like(w) * 0.02 for _ in range(max(0, min(7, (512 << 20) // (nout * k * 2) - 1)))]
        turn = [0]

        def gemv():
            turn[0] += 1
            return torch.matmul(x1, copies[turn[0] % len(copies)].t())

        res["gemv"][name] = median_ms(gemv, 5, 15, 20)
        del w, copies
    torch.cuda.empty_cache()
    print(f"gemm/gemv done ({time.time() - t_start:.0f} s)", flush=True)

    def sdpa(q, kk, vv):
        return F.scaled_dot_product_attention(q, kk, vv, is_causal=True, enable_gqa=True)

    def flash(q, kk, vv):
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return sdpa(q, kk, vv)

    def picked_backend(d):
        """Kernel names of one default-choice SDPA call at 4096 tokens, through the profiler (once per head size)."""
        from torch.profiler import ProfilerActivity, profile
        q = torch.randn(1, HEADS, 4096, d, device=dev, dtype=torch.bfloat16)
        kk = torch.randn(1, KV_HEADS, 4096, d, device=dev, dtype=torch.bfloat16)
        vv = torch.randn_like(kk)
        sdpa(q, kk, vv)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            sdpa(q, kk, vv)
            torch.cuda.synchronize()
        names = sorted({e.key for e in prof.key_averages() if e.device_type is not None and "cuda" in str(e.device_type).lower()}
                       or {e.key for e in prof.key_averages()})
        return {"backend": backend_of(names), "kernels": names[:8]}

    for d in head_dims:
        sfx = "" if d == HEAD_DIM else f"_d{d}"
        for g in ("sdpa_prefill" + sfx, "sdpa_prefill_flash" + sfx):
            res.setdefault(g, {})
        attempt("sdpa_backend", str(d), lambda: picked_backend(d))
        for L in contexts:
            q = torch.randn(1, HEADS, L, d, device=dev, dtype=torch.bfloat16)
            kk = torch.randn(1, KV_HEADS, L, d, device=dev, dtype=torch.bfloat16)
            vv = torch.randn(1, KV_HEADS, L, d, device=dev, dtype=torch.bfloat16)
            warm, reps = prefill_reps(L)
            attempt("sdpa_prefill" + sfx, str(L), lambda: median_ms(lambda: sdpa(q, kk, vv), warm, reps))
            attempt("sdpa_prefill_flash" + sfx, str(L), lambda: median_ms(lambda: flash(q, kk, vv), warm, reps))
            if d == HEAD_DIM:
                q1 = q[:, :, -1:, :].contiguous()

                def decode():
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
                        return F.scaled_dot_product_attention(q1, kk, vv, enable_gqa=True)

                attempt("sdpa_decode", str(L), lambda: median_ms(decode, 3, 15, 20))
                del q1
            del q, kk, vv
            torch.cuda.empty_cache()
            print(f"sdpa d={d} L={L} done ({time.time() - t_start:.0f} s)", flush=True)
    res["seconds"] = time.time() - t_start

    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    c = res["ceilings"]
    print(f"peer on {res['device']}, torch {res['torch']}: copy {c['copy_gbps']:.0f} GB/s, "
          f"matmul {c['matmul_tflops']:.0f} TFLOP/s, {res['seconds']:.0f} s")
    for name, ms in res["gemm"].items():
        nout, k = shapes[name]
        print(f"  gemm {name:8s} {args.tokens}x{nout}x{k}: {ms:.3f} ms, {2 * args.tokens * nout * k / ms / 1e9:.0f} TFLOP/s")
    for name, ms in res["gemm_residual"].items():
        nout, k = shapes[name]
        print(f"  gemm {name:8s} + f32 residual add: {ms:.3f} ms, {2 * args.tokens * nout * k / ms / 1e9:.0f} TFLOP/s")
    for m, ms in res["lm_head_rows"].items():
        print(f"  gemm lm_head  {m}x{VOCAB}x{DIM}: {ms:.4f} ms, {VOCAB * DIM * 2 / ms / 1e6:.0f} GB/s of weights")
    for name, ms in res["gemv"].items():
        nout, k = shapes[name]
        print(f"  gemv {name:8s} 1x{nout}x{k}: {ms:.4f} ms, {nout * k * 2 / ms / 1e6:.0f} GB/s")
    for d in head_dims:
        sfx = "" if d == HEAD_DIM else f"_d{d}"
        picked = res["sdpa_backend"].get(str(d), {}).get("backend", "?")
        for L in contexts:
            p, fl = res["sdpa_prefill" + sfx].get(str(L)), res["sdpa_prefill_flash" + sfx].get(str(L))
            flops = attention_flops(L, HEADS, d)
            line = f"  sdpa d={d} L={L}:"
            line += f" prefill default ({picked}) {p:.2f} ms ({flops / p / 1e9:.0f} TFLOP/s)" if p else " default failed"
            line += f", flash {fl:.2f} ms ({flops / fl / 1e9:.0f} TFLOP/s)" if fl else ", flash failed"
            dd = res["sdpa_decode"].get(str(L)) if d == HEAD_DIM else None
            if dd:
                line += f", decode {dd * 1000:.1f} us ({2 * L * KV_HEADS * HEAD_DIM * 2 / dd / 1e6:.0f} GB/s)"
            print(line)
    if res["errors"]:
        print(f"  {len(res['errors'])} rows failed: {json.dumps(res['errors'])}")


if __name__ == "__main__":
    main()
