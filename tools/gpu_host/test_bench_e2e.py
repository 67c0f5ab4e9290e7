#!/usr/bin/env python3
"""CPU tests of bench_e2e.py's pure parts (no torch): python3 -m unittest tools/gpu_host/test_bench_e2e.py"""
import json
import math
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_e2e as E  # noqa: E402


class PureParts(unittest.TestCase):
    def test_docs(self):
        self.assertEqual(E.parse_docs("32k,128k"), [("32k", 32256), ("128k", 130560)])
        self.assertEqual(E.parse_docs("4096"), [("4096", 4096)])
        # 128k + 256 new tokens fits the 131,072-token context
        self.assertLessEqual(E.parse_docs("128k")[0][1] + 256, E.MAX_POS)
        with self.assertRaises(ValueError):
            E.parse_docs("1")
        self.assertEqual(E.parse_ints("256,64,64"), [64, 256])
        with self.assertRaises(ValueError):
            E.parse_ints("1")

    def test_ids_are_fixed_and_below_the_specials(self):
        a, b = E.doc_ids(1000, 7), E.doc_ids(1000, 7)
        self.assertEqual(a, b)
        self.assertEqual(a[0], E.BOS)
        self.assertTrue(all(0 <= i < E.FIRST_SPECIAL for i in a[1:]))
        self.assertNotEqual(a, E.doc_ids(1000, 8))

    def test_flop_floor_matches_issue_15(self):
        # issue 15: 130,263 tokens -> 1.83e15 linear + 4.5e15 causal attention FLOPs, ~8.4 s at 758 TFLOP/s
        lin, att = E.prefill_flops(130263)
        self.assertAlmostEqual(lin / 1e15, 1.83, delta=0.02)  # 1.82: layer weights only
        self.assertAlmostEqual(att / 1e15, 4.45, delta=0.01)
        self.assertAlmostEqual((lin + att) / 758e12, 8.3, delta=0.1)
        self.assertEqual(E.layer_params(), 32 * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336))

    def test_tokenizer_covers_every_id(self):
        t = E.wordlevel_tokenizer(E.VOCAB)
        vocab = t["model"]["vocab"]
        self.assertEqual(len(vocab), E.VOCAB)
        self.assertEqual(sorted(vocab.values()), list(range(E.VOCAB)))
        self.assertEqual(vocab["<|begin_of_text|>"], E.BOS)
        self.assertEqual(vocab["<|end_of_text|>"], E.EOS)
        self.assertEqual(len(t["added_tokens"]), E.VOCAB - E.FIRST_SPECIAL)
        self.assertIn(t["model"]["unk_token"], vocab)

    def test_hf_marks(self):
        stamps = [10.0 + 2.0] + [12.0 + 0.1 * i for i in range(1, 256)]  # prefill 2 s, then 100 ms a token
        m = E.hf_marks(10.0, stamps, [64, 256, 512])
        self.assertAlmostEqual(m["prefill_s"], 2.0)
        self.assertAlmostEqual(m["by_n"]["64"]["total_s"], 2.0 + 6.3)
        self.assertAlmostEqual(m["by_n"]["256"]["decode_ms_per_token"], 100.0)
        self.assertNotIn("512", m["by_n"])  # not reached: left out, not invented

    def test_rows_and_report(self):
        hf = {"prefill_s": 11.45, "by_n": {"64": {"total_s": 18.4, "decode_ms_per_token": 111.0}}}
        eng = {"dense": {("128k", 64): {"prefill_ms": 9000.0, "decode_ms_per_token": 10.0, "total_ms": 9700.0,
                                        "sparse_layers": 0, "selected_fraction_mean": 1.0}},
               "tsa:keep=0.25": {}}
        rows, (lin, att, floor) = E.rows_for("128k", 130560, 64, hf, eng, 758.0)
        self.assertEqual([r["impl"] for r in rows], ["HF transformers (sdpa)", "LongSieve dense"])
        self.assertAlmostEqual(rows[1]["speedup_vs_hf"], 18.4 / 9.7)
        self.assertAlmostEqual(rows[0]["out_tokens_per_s"], 64 / 18.4)
        self.assertAlmostEqual(floor, (lin + att) / 758e12)
        md = E.markdown({("128k", 130560, 64): (rows, (lin, att, floor))}, 758.0, {"device": "H200", "ckpt": "/x"})
        self.assertIn("| LongSieve dense | 9.00 | 10.0 | 9.70 |", md)
        rows, _ = E.rows_for("128k", 130560, 256, None, eng, None)  # nothing measured: no rows, no crash
        self.assertEqual(rows, [])
        self.assertTrue(math.isnan(E.rows_for("x", 10, 64, hf, {}, None)[1][2]))

    def test_generated_text_filter(self):
        self.assertTrue(E.generated_text(" ".join(f"t{i}" for i in range(100)) + "\n"))
        self.assertFalse(E.generated_text("t12 t13\n"))
        self.assertFalse(E.generated_text("stats_json " + "x" * 300))


class Steps(unittest.TestCase):
    def test_run_step_times_out_a_silent_process(self):
        with tempfile.TemporaryDirectory() as d:
            t = time.time()
            rc, _ = E.run_step("sleep", [sys.executable, "-c", "import time; print('hi', flush=True); time.sleep(60)"],
                               5.5, os.path.join(d, "log"))
            self.assertEqual(rc, 124)
            self.assertLess(time.time() - t, 40)
            with open(os.path.join(d, "log")) as f:
                self.assertIn("hi", f.read())
            rc, _ = E.run_step("ok", [sys.executable, "-c", "print(1)"], 30, os.path.join(d, "log2"))
            self.assertEqual(rc, 0)
            self.assertEqual(E.run_step("skip", ["true"], 2, os.path.join(d, "log3"))[0], 125)

    def test_write_json_is_atomic(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "a.json")
            E.write_json(p, {"a": float("nan")})
            with open(p) as f:
                self.assertTrue(math.isnan(json.load(f)["a"]))
            self.assertFalse(os.path.exists(p + ".tmp"))


if __name__ == "__main__":
    unittest.main()
