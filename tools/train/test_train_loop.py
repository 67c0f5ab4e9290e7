#!/usr/bin/env python3
"""Tests of a training run that stops and resumes (train_loop.py, train_needle.py's data and model shape).

    python3 tools/train/test_train_loop.py

Needs numpy and torch (any version from 1.13, CPU is enough), not tokenizers or transformers: the data tests
use a word-level stand-in for the trained tokenizer. run_gpu.sh runs these before training, as it runs the
suite's self-check, so a broken resume never costs a device call.
"""

import json
import os
import struct
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chat_format as CF  # noqa: E402
import suite as S  # noqa: E402
import train_loop as TL  # noqa: E402
import train_needle as TN  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))


class WordTokenizer:
    """Stands in for the trained BPE: one id per word (hashed into the vocabulary), the special tokens fixed."""

    VOCAB = 4096

    class Encoding:
        def __init__(self, ids):
            self.ids = ids

    def token_to_id(self, t):
        return CF.SPECIAL_TOKENS.index(t)

    def encode(self, text, add_special_tokens=False):
        import zlib
        n = len(CF.SPECIAL_TOKENS)
        return self.Encoding([n + zlib.crc32(w.encode()) % (self.VOCAB - n) for w in text.split()])


class ToyModel:
    """A tiny next-token model (embedding, one linear layer) and what a run of it needs."""

    @staticmethod
    def build(seed):
        import torch
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Embedding(64, 16), torch.nn.Tanh(), torch.nn.Linear(16, 64))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
        return model, opt

    @staticmethod
    def batches(start):
        """Batch b depends on b alone, as train_needle's RowMaker.batch_at."""
        import torch
        b = start
        while True:
            g = torch.Generator().manual_seed(1000 + b)
            ids = torch.randint(0, 64, (4, 12), generator=g)
            yield ids, torch.ones_like(ids, dtype=torch.int8)
            b += 1

    @staticmethod
    def loss_step(model, ids, code):
        import torch.nn.functional as F
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 64), ids[:, 1:].reshape(-1))
        return loss, loss, loss * 0


def have_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


@unittest.skipUnless(have_torch(), "needs torch: run where it is installed (run_gpu.sh runs it on the GPU host)")
class ResumeTest(unittest.TestCase):

    def run_straight(self, total):
        model, opt = ToyModel.build(7)
        state = TL.TrainState(total, 1e-2)
        reason = TL.train(model, opt, ToyModel.batches(0), state, ToyModel.loss_step, "cpu", log=lambda *a: None)
        self.assertEqual("done", reason)
        return model, state

    def test_a_run_resumed_after_every_step_ends_with_the_same_weights_as_one_run(self):
        total = 30
        straight, straight_state = self.run_straight(total)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "checkpoint.pt")
            model, opt = ToyModel.build(7)
            state = TL.TrainState(total, 1e-2)
            reasons = []
            while True:
                # a deadline already past: each process takes one step and checkpoints
                reason = TL.train(model, opt, ToyModel.batches(state.step), state, ToyModel.loss_step, "cpu",
                                  deadline=0, log=lambda *a: None)
                reasons.append(reason)
                if reason != "deadline":
                    break
                TL.save_checkpoint(path, model, opt, state, {"note": "toy"})
                ck = TL.load_checkpoint(path)
                model, opt = ToyModel.build(99)  # fresh objects, other weights: the checkpoint must restore all
                model.load_state_dict(ck["model"])
                opt.load_state_dict(ck["opt"])
                state = ck["state"]
                self.assertEqual({"note": "toy"}, ck["extra"])
                self.assertFalse(os.path.exists(path + ".tmp"))
        self.assertEqual(["deadline"] * (total - 1) + ["done"], reasons)
        self.assertEqual(total, state.step)
        self.assertEqual(total, state.processes)
        for (name, a), b in zip(straight.state_dict().items(), model.state_dict().values()):
            self.assertTrue(bool((a == b).all()), name)
        strip = lambda h: [{k: v for k, v in r.items() if k != "elapsed"} for r in h]  # noqa: E731
        self.assertEqual(strip(straight_state.hist), strip(state.hist))
        self.assertEqual(straight_state.ema, state.ema)

    def test_the_summed_training_time_stops_a_run(self):
        model, opt = ToyModel.build(7)
        state = TL.TrainState(30, 1e-2)
        reason = TL.train(model, opt, ToyModel.batches(0), state, ToyModel.loss_step, "cpu", hard_stop_seconds=0,
                          log=lambda *a: None)
        self.assertEqual(("wall", 1), (reason, state.step))

    def test_a_file_that_is_not_a_checkpoint_is_refused(self):
        import torch
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "other.pt")
            torch.save({"model": {}}, path)
            with self.assertRaisesRegex(ValueError, "not a longsieve-train-checkpoint"):
                TL.load_checkpoint(path)

    def test_the_loader_yields_batches_in_order_from_its_start_whatever_the_workers(self):
        st = S.SuiteText(S.DEFAULT_TEXT)
        maker = TN.RowMaker(st, None, 5, WordTokenizer())
        # a 4-step run of 1024-token rows: the curriculum's short rows (too short for most documents) never come
        want = [maker.batch_at(b, TN.seq_len_for(b, 4, 1024), 1024)[0] for b in range(3, 8)]
        for workers in (0, 2):
            loader = TN.make_loader(st, None, 5, 4, 1024, 1024, workers, start=3, tokenizer=WordTokenizer())
            it = iter(loader)
            got = [next(it)[0].numpy() for _ in range(5)]
            del it, loader
            for b, (w, g) in enumerate(zip(want, got), start=3):
                self.assertTrue((w == g).all(), f"batch {b} with {workers} workers")


class DataTest(unittest.TestCase):

    def test_a_batch_depends_on_its_index_alone(self):
        st = S.SuiteText(S.DEFAULT_TEXT)
        fresh = TN.RowMaker(st, None, 5, WordTokenizer())
        used = TN.RowMaker(st, None, 5, WordTokenizer())
        for b in range(4):
            used.batch_at(b, 256, 512)
        ids, code = fresh.batch_at(4, 256, 512)
        ids2, code2 = used.batch_at(4, 256, 512)
        self.assertTrue((ids == ids2).all() and (code == code2).all())
        other, _ = fresh.batch_at(5, 256, 512)
        self.assertFalse((ids == other).all())
        self.assertEqual((2, 256), ids.shape)
        self.assertTrue((code == TN.ANS_CODE).any() and (code == TN.CTX_CODE).any())

    def test_the_schedule_warms_up_then_decays_to_a_tenth(self):
        total, warm = 1000, TL.warmup_steps(1000)
        self.assertEqual(50, warm)
        self.assertAlmostEqual(1e-3 / 50, TL.lr_at(0, 1e-3, warm, total))
        self.assertAlmostEqual(1e-3, TL.lr_at(warm - 1, 1e-3, warm, total))
        self.assertAlmostEqual(1e-3, TL.lr_at(warm, 1e-3, warm, total))
        self.assertAlmostEqual(1e-4, TL.lr_at(total, 1e-3, warm, total))
        lrs = [TL.lr_at(s, 1e-3, warm, total) for s in range(warm, total)]
        self.assertEqual(sorted(lrs, reverse=True), lrs)


class ModelShapeTest(unittest.TestCase):

    def args(self, **shape):
        ap_defaults = {"vocab": 4096, **TN.MODEL_SHAPE, **shape}
        return type("Args", (), ap_defaults)()

    def test_the_parameter_count_is_the_bundled_models(self):
        folder = os.path.join(REPO, "models", "longsieve-needle-7m")
        with open(os.path.join(folder, "model.safetensors"), "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        stored = 0
        for name, t in header.items():
            if name != "__metadata__":
                n = 1
                for s in t["shape"]:
                    n *= s
                stored += n
        with open(os.path.join(folder, "config.json")) as f:
            cfg = json.load(f)
        shape = {"dim": cfg["hidden_size"], "hidden": cfg["intermediate_size"], "layers": cfg["num_hidden_layers"],
                 "heads": cfg["num_attention_heads"], "kv_heads": cfg["num_key_value_heads"],
                 "head_dim": cfg["head_dim"]}
        self.assertEqual(TN.MODEL_SHAPE, shape)
        self.assertEqual(stored, TN.param_count(TN.model_config(self.args(vocab=cfg["vocab_size"]))))

    def test_a_shape_outside_the_envelope_is_refused_in_one_line(self):
        for shape, words in (({"dim": 512, "hidden": 2048, "layers": 8}, "over 20 MB"),
                             ({"heads": 4, "kv_heads": 4}, "at least twice"),
                             ({"head_dim": 96}, "not 64 or 128"),
                             ({"layers": 4}, "under 6")):
            with self.assertRaises(SystemExit) as e:
                TN.model_config(self.args(**shape))
            self.assertIn(words, str(e.exception))
            self.assertNotIn("\n", str(e.exception))
        mc = TN.model_config(self.args(layers=8))  # 8.4M parameters: a larger model inside the envelope
        self.assertLessEqual(2 * TN.param_count(mc), TN.MAX_MODEL_BYTES)


if __name__ == "__main__":
    unittest.main(verbosity=2)
