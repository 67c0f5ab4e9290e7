"""The two comparisons of official_crosscheck.py (read its docstring first): TSA per sparse layer and head,
TokenSelect per selection (one list per layer). Each check runs the official selection on one dumped event
and returns table rows; the official modules come in from official_crosscheck.load_official."""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F


class CudaLooking(torch.Tensor):
    """A CPU tensor view whose is_cuda is True: meets triton_get_attn_cache's `assert query_states.is_cuda`
    when its kernels run in Triton's interpreter (--device cpu); nothing else reads the flag."""

    @property
    def is_cuda(self):
        return True


def row(dump, method, e, head, kept, engine, official, ties, gap, score_delta, frame_ok=True):
    """One table row: engine and official are the two selected sets, ties the differing tokens that are ties;
    frame_ok: the parts kept by rule (TSA's window, TokenSelect's sinks and local window) agree; if not, that
    counts as one more difference that is not a tie."""
    diff = engine ^ official
    return {"dump": os.path.basename(os.path.normpath(dump.folder)), "method": method, "layer": e["layer"], "pos0": e["pos0"], "rows": e["rows"],
            "end": e["end"], "head": head, "kept e/o": kept, "frame": "ok" if frame_ok else "DIFF",
            "overlap": f"{len(engine & official) / max(len(engine), len(official), 1):.4f}",
            "diff": len(diff), "ties": ties, "non-ties": len(diff) - ties + (0 if frame_ok else 1),
            "max gap": f"{gap:.2e}", "score rel diff": f"{score_delta:.2e}"}


class TsaCheck:
    """SparseCluster.get_index on the event's window queries (padded to the cache length) and expanded keys."""
    kind = "tsa"

    def __init__(self, dump, sparse_cluster, kernel, device, rel):
        self.dump, self.sc, self.device, self.rel = dump, sparse_cluster, device, rel
        name, params = dump.terms["prefill"]
        self.params = params if name == "tsa" else None
        # records what the official get_index computed (the function itself runs unchanged)
        official = kernel.triton_get_attn_cache
        self.last_cache = None

        def recording(*a, **k):
            self.last_cache = official(*a, **k)
            return self.last_cache
        sparse_cluster.triton_get_attn_cache = recording

    def not_comparable(self, e):
        if self.params is None:
            return "the prefill policy is not tsa"
        if float(self.params["keep"]) > 0:
            return "keep=F is a benchmark knob; the official code cuts at the coverage"
        if e["w"] != int(self.params["window"]):
            return f"a chunk of {e['rows']} rows is shorter than the window: the official window would reach back"
        return None

    def compare(self, e):
        c, p = self.dump.config, self.params
        heads, kv_heads, d, w, end = c["heads"], c["kv_heads"], c["head_dim"], e["w"], e["end"]
        prefix, tau, pool, keep_e = end - w, float(p["tau"]), max(1, int(p["pool"])), e["keep"]
        q = torch.zeros(1, heads, end, d)  # (1, H, end, d): get_index reads only the last w rows
        q[0, :, prefix:] = torch.from_numpy(self.dump.array(e["queries"])).transpose(0, 1)
        k = torch.from_numpy(np.ascontiguousarray(self.dump.keys(e).transpose(1, 0, 2)))[None]  # (1, Hkv, end, d)
        k = self.sc.repeat_kv(k, heads // kv_heads).contiguous()
        q, k = q.to(self.device), k.to(self.device)
        if self.device == "cpu":
            q, k = q.as_subclass(CudaLooking), k.as_subclass(CudaLooking)
        cluster = self.sc.SparseCluster()
        cluster.layer_idx, cluster.window_size, cluster.kernel_size = e["layer"], w, pool
        cluster.min_tokens, cluster.coverage = int(p["min"]), tau
        idx = cluster.get_index(q, k)  # (1, H, keep + w) sorted, or None: dense
        idx = None if idx is None else idx.as_subclass(torch.Tensor)[0].cpu().numpy()
        # the scores get_index ranks and cuts (sparse_cluster.py, re-expressed to judge ties):
        #   attn_cache = F.avg_pool1d(attn_cache, kernel_size = self.kernel_size, padding=self.kernel_size//2, stride=1)
        #   attn_cache_global = attn_cache.mean(dim=1)
        #   attn_cache_normalized = attn_cache / (attn_cache.sum(dim=-1, keepdim=True) + 1e-8)
        #   attn_cache_normalized_global = attn_cache_global / (attn_cache_global.sum(dim=-1, keepdim=True) + 1e-8)
        #   sorted_attn_cache, _ = torch.sort(attn_cache_normalized_global, dim=-1, descending=False)
        #   cumulative_coverage = torch.cumsum(sorted_attn_cache.float(), dim=-1)
        cache = F.avg_pool1d(self.last_cache.as_subclass(torch.Tensor).float(), kernel_size=pool, padding=pool // 2,
                             stride=1)
        glob = cache.mean(dim=1)
        scores = (cache / (cache.sum(dim=-1, keepdim=True) + 1e-8))[0].cpu().numpy()  # (H, prefix)
        cum = torch.cumsum(torch.sort(glob / (glob.sum(dim=-1, keepdim=True) + 1e-8), dim=-1)[0].float(),
                           dim=-1)[0].cpu().numpy()
        engine_mass = self.dump.array(e["scores"])  # (H, prefix) the engine's pooled proxy mass
        official_mass = cache[0].cpu().numpy()
        delta = float(np.abs(engine_mass - official_mass).max() / max(official_mass.max(), 1e-30))
        keep_o = prefix if idx is None else idx.shape[1] - w
        keep_tie = keep_e == keep_o or self.keep_tie(cum, tau, prefix, keep_e, keep_o, int(p["min"]))
        lists = self.dump.array(e["lists"])  # (H, keep + w) engine slots
        window = np.arange(prefix, end)
        rows = []
        for h in range(heads):
            engine = set(lists[h, :keep_e].tolist())
            official = set(range(prefix)) if idx is None else set(idx[h, :keep_o].tolist())
            order = np.sort(scores[h])[::-1]
            t_hi, t_lo = order[min(keep_e, keep_o) - 1], order[max(keep_e, keep_o) - 1]
            ties, gap = 0, 0.0
            for j in engine ^ official:
                s = scores[h, j]
                outside = max(t_lo - s, s - t_hi, 0.0) / max(t_hi, 1e-30)
                gap = max(gap, outside)
                ties += keep_tie and outside <= self.rel
            frame_ok = np.array_equal(lists[h, keep_e:], window) and (idx is None or np.array_equal(idx[h, keep_o:],
                                                                                                   window))
            rows.append(row(self.dump, "tsa", e, h, f"{keep_e}/{keep_o}", engine, official, ties, gap, delta,
                            frame_ok))
        return rows

    def keep_tie(self, cum, tau, prefix, keep_e, keep_o, min_tokens):
        """Whether the two keep counts differ only by where tau falls among cumulative masses equal to it
        within rel: keep = max(min, prefix - (n_drop + 1)), n_drop = #{cumsum < tau} (0: dense)."""
        def n_drop(keep):
            return 0 if keep >= prefix else prefix - max(keep, min_tokens) - 1
        lo, hi = sorted((n_drop(keep_e), n_drop(keep_o)))
        return all(abs(cum[j] - tau) <= self.rel * tau for j in range(lo, hi))


class TokenSelectCheck:
    """TokenRetriever.retrieval_indices over a pool of the dumped pre-RoPE keys, one layer, identity slots."""
    kind = "tokenselect"

    def __init__(self, dump, token_retrieval, device, rel):
        self.dump, self.tr, self.device, self.rel = dump, token_retrieval, device, rel

    def params(self, e):
        name, p = self.dump.terms["decode" if e["decode"] else "prefill"]
        return p if name == "tokenselect" else None

    def not_comparable(self, e):
        p = self.params(e)
        if p is None:
            return "not a tokenselect slot"
        wanted = {"heads": "layer", "gqa": "mod", "scale": "none", "index": "full", "score": "neutral"}
        off = [f"{k}={p[k]}" for k, v in wanted.items() if p[k] != v]
        if off:
            return (f"{', '.join(off)}: the official code is heads=layer, gqa=mod (h % nKv), scale=none, index=full,"
                    " score=neutral")
        if self.dump.config["rope_scaling"] != "default":
            return f"RoPE scaling {self.dump.config['rope_scaling']}: the official RotaryEmbedding has none"
        if e["rows"] > int(p["window"]):
            return f"{e['rows']} rows > window {p['window']}: the engine's local window grows, the official n_local does not"
        return None

    def compare(self, e):
        tr, dev, c, p = self.tr, self.device, self.dump.config, self.params(e)
        heads, kv_heads, d, end = c["heads"], c["kv_heads"], c["head_dim"], e["end"]
        sinks, local, pool = int(p["sinks"]), int(p["window"]), int(p["pool"])
        lists = self.dump.array(e["lists"])[0]  # (listLen,) sinks ++ top ascending ++ local
        count = lists.shape[0] - sinks - local
        tr.TOP_K, tr.N_INIT, tr.N_Local, tr.ROPE_BASE, tr.ROPE_SCALE = count, sinks, local, c["rope_theta"], 1
        tr.QUERY_ROTATE, tr.QUERY_CACHE, tr.KERNEL_SIZE = True, False, pool if pool > 1 else -1  # as patch() sets them
        keys = torch.from_numpy(self.dump.keys(e)).to(dev).contiguous()  # (end, Hkv, d) pre-RoPE

        class Pool:  # SGLang's token_to_kv_pool, as far as TokenRetriever reads it
            def get_key_buffer(self, layer_id):
                return keys

        seen = {}

        class Recording(tr.TokenRetriever):  # the official method runs unchanged; its arguments are kept
            def get_topk_tokens(self, *args):
                seen["args"] = args
                return super().get_topk_tokens(*args)

        retriever = Recording(num_layers=1, head_dim=d, num_heads=heads, num_kv_heads=kv_heads,
                              fingerprint_dim=heads * d, max_num_tokens=end, dtype=torch.float32, device=dev,
                              token_to_kv_pool=Pool(),
                              rotary_embedding=tr.RotaryEmbedding(d, c["rope_theta"], 1, dev))
        retriever.add_k_cache(torch.arange(end, dtype=torch.int32, device=dev), 0)
        query = torch.from_numpy(self.dump.array(e["queries"])).to(dev)  # (rows, H * d) pre-RoPE
        idx = retriever.retrieval_indices(query, 0, sinks, local, count)
        engine = lists[sinks:sinks + count] - sinks
        frame_ok = (np.array_equal(lists[:sinks], np.arange(sinks))
                    and np.array_equal(lists[sinks + count:], np.arange(end - local, end)))
        if idx is None:  # the official code attends densely here: a structural difference
            return [row(self.dump, "tokenselect", e, "-", f"{count}/dense", set(engine.tolist()), set(), 0, 0, 0,
                        False)]
        idx = idx.cpu().numpy()
        frame_ok &= (np.array_equal(idx[:sinks], np.arange(sinks))
                     and np.array_equal(idx[sinks + count:], np.arange(end - local, end)))
        (v16, raw16), (v32, raw32) = self.votes(*seen["args"], heads, kv_heads, d, pool)
        engine_votes = self.dump.array(e["votes"])[0]  # (cands,) fp32, before pooling
        scale = max(raw32.max(), 1e-30)
        picked = set(engine.tolist())
        # as shipped: bf16 vote logits; a tie when the bf16 votes differ by no more than their own rounding
        official = set((idx[sinks:sinks + count] - sinks).tolist())
        err = np.abs(v16 - v32)
        chosen = np.array(sorted(official))
        t = v16[chosen].min()
        e_b = err[chosen[v16[chosen] == t]].max()
        ulp = 2.0 ** (math.floor(math.log2(t)) - 7) if t > 0 else 0.0
        # official-f32: the same kernel and lines into an fp32 buffer; a tie within rel of the boundary
        top32 = torch.topk(torch.from_numpy(v32), count).indices.numpy()  # official: torch.topk(scores, topk, dim=-1)
        official32 = set(top32.tolist())
        # A token where the official code as shipped and the official code at fp32 choose differently, and the
        # engine (fp32) chooses as the official fp32 does, is the official kernel's own bf16 rounding: a tie.
        # The per-token bound below re-creates that rounding in numpy, but Triton's bf16 accumulation order
        # differs, so it cannot catch all of them (the first GPU run found 2-6 per dump with gaps up to 0.2).
        # A token the engine chooses unlike the official fp32 lines, within --f32-rel of their boundary, is an fp32
        # tie; as shipped it is whatever bf16 made of that tie, so it is a tie there too.
        t32 = v32[top32].min()
        diff32 = picked ^ official32
        f32_ties = {j for j in diff32 if abs(v32[j] - t32) <= self.rel * t32}
        ties32, gap32 = self.ties(diff32, v32, t32, lambda j: self.rel * t32)
        diff16 = picked ^ official
        own_rounding = {j for j in diff16 if (j in picked) == (j in official32) or j in f32_ties}
        ties, gap = self.ties(diff16 - own_rounding, v16, t, lambda j: err[j] + e_b + ulp)
        out = [row(self.dump, "tokenselect", e, "-", f"{count}/{count}", picked, official, ties + len(own_rounding), gap,
                   float(np.abs(engine_votes - raw16).max() / scale), frame_ok),
               row(self.dump, "tokenselect-f32", e, "-", f"{count}/{count}", picked, official32, ties32, gap32,
                   float(np.abs(engine_votes - raw32).max() / scale), frame_ok)]
        return out

    @staticmethod
    def ties(diff, votes, t, bound):
        ties, gap = 0, 0.0
        for j in diff:
            g = abs(votes[j] - t)
            gap = max(gap, g / t if t > 0 else (0.0 if g == 0 else math.inf))
            ties += g <= bound(j)
        return ties, gap

    def votes(self, query_fingerprints, token_fingerprints, topk, indices, heads, kv_heads, d, pool):
        """The official vote over paged_matmul's scores stored in bf16 (as shipped) and in fp32, each as
        (pooled, before pooling) (the engine dumps its votes before pooling). Lines of get_topk_tokens, re-expressed:
            scores = torch.empty((num_heads, num_tokens), device=self.device, dtype=torch.bfloat16)
            paged_matmul(query_fingerprints, token_fingerprints, indices, scores, num_tokens, num_heads, ...)
            scores = torch.softmax(scores, dim=-1).sum(dim=0)
            if KERNEL_SIZE > 0: scores = torch.nn.functional.max_pool1d(scores.unsqueeze(0),
                kernel_size=KERNEL_SIZE, padding=(KERNEL_SIZE-1)//2, stride=1).squeeze(0)"""
        n = indices.shape[0]
        out = []
        for dtype in (torch.bfloat16, torch.float32):
            scores = torch.empty((heads, n), device=query_fingerprints.device, dtype=dtype)
            self.tr.paged_matmul(query_fingerprints.view(heads, d), token_fingerprints, indices, scores, n, heads,
                                 kv_heads, d)
            v = torch.softmax(scores, dim=-1).sum(dim=0)
            raw = v.float().cpu().numpy()
            if pool > 1:
                v = F.max_pool1d(v.unsqueeze(0), kernel_size=pool, padding=(pool - 1) // 2, stride=1).squeeze(0)
            out.append((v.float().cpu().numpy(), raw))
        return out
