#!/usr/bin/env python3
"""The quality suite's documents: RULER-style tasks in generated, natural-looking haystacks.

Plain Python (no torch), so it runs anywhere: the training script imports it to make training
documents, and `python3 tools/train/suite.py --self-check` tests it on a machine without torch.
All text comes from one file shared with the Java suite (io.longsieve.eval.SuiteText):
gpu-engine/src/main/resources/io/longsieve/eval/suite-text.json.

An item is a dict in the Spark job's input format plus what the scorer needs:
  doc_id, task (qa | multi_doc_qa | summary), text or documents [{title, text}], question,
  reference (the exact answer text the model is trained to write), kind, expected (answer items),
  depth (0..1, where the needle or the asked-about part sits), length (target prompt tokens).
"""

import argparse
import json
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TEXT = os.path.join(HERE, "..", "..", "gpu-engine", "src", "main", "resources", "io", "longsieve",
                            "eval", "suite-text.json")

KINDS = ["niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "vt", "mdqa", "summary"]
TASK_OF_KIND = {"niah_single": "qa", "niah_multikey": "qa", "niah_multivalue": "qa", "niah_multiquery": "qa",
                "vt": "qa", "mdqa": "multi_doc_qa", "summary": "summary"}
SLOT = re.compile(r"\{([a-z0-9_]+)\}")
MARKERS = ["special magic number", "VAR ", "secret code", "Key fact"]


class SuiteText:
    """The shared templates and word lists, and how slots are filled."""

    def __init__(self, path=DEFAULT_TEXT):
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        self.words = d["words"]
        self.haystack = d["haystack"]
        self.needles = d["needles"]
        self.questions = d["questions"]
        self.prompts = d["prompts"]
        self.answers = d["answers"]
        self.list_sep = d["answers"]["list_separator"]
        self.summary_sep = d["answers"]["summary_separator"]

    def fill(self, template, rng, given=None):
        given = given or {}
        picked = {}

        def one(m):
            s = m.group(1)
            if s in given:
                return str(given[s])
            if s in picked:  # the same slot twice in one template means the same word
                return picked[s]
            v = self._slot(s, rng)
            picked[s] = v
            return v
        return SLOT.sub(one, template)

    def _slot(self, s, rng):
        if s in self.words:
            return rng.choice(self.words[s])
        if s.endswith("2") and s[:-1] in self.words:
            return rng.choice(self.words[s[:-1]])
        if s == "n":
            return str(rng.randint(2, 60))
        if s == "n3":
            return str(rng.randint(100, 999))
        if s == "pct":
            return str(rng.randint(1, 99))
        if s == "year":
            return str(rng.randint(1950, 2030))
        if s == "day":
            return str(rng.randint(1, 28))
        if s == "hour":
            return str(rng.randint(6, 22))
        if s == "min":
            return rng.choice(["00", "15", "30", "45"])
        raise KeyError(f"unknown slot {{{s}}}")

    def sentence(self, rng):
        return self.fill(rng.choice(self.haystack), rng)

    def key(self, rng):
        return rng.choice(self.words["keyadj"]) + "-" + rng.choice(self.words["keynoun"])

    @staticmethod
    def value(rng):
        return str(rng.randint(1000000, 9999999))

    @staticmethod
    def var(rng):
        return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5))


def join_sentences(sentences, rng):
    """Sentences into paragraphs of 3..7 sentences."""
    out, in_par, par_len = [], 0, rng.randint(3, 7)
    for s in sentences:
        if out:
            if in_par >= par_len:
                out.append("\n\n")
                in_par, par_len = 0, rng.randint(3, 7)
            else:
                out.append(" ")
        out.append(s)
        in_par += 1
    return "".join(out)


def insert_needles(rng, st, n_sentences, needles_at, repeat=0.0):
    """Haystack of n_sentences with needles inserted. needles_at: [(depth, text)], kept in order
    of depth (ties keep the given order). repeat: the chance that a haystack sentence repeats an
    earlier one (training only: copying repeated text teaches the model to copy)."""
    hay = []
    for i in range(n_sentences):
        hay.append(hay[rng.randrange(i)] if i > 2 and repeat > 0 and rng.random() < repeat else st.sentence(rng))
    placed = sorted(enumerate(needles_at), key=lambda t: (t[1][0], t[0]))
    for shift, (_, (depth, text)) in enumerate(placed):
        idx = min(len(hay), int(round(depth * n_sentences))) + shift
        hay.insert(idx, text)
    return hay


def distinct(rng, make, n, avoid=()):
    seen, out = set(avoid), []
    while len(out) < n:
        v = make(rng)
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def sorted_depths(rng, n, first=None):
    ds = sorted(rng.random() for _ in range(n))
    return ds


class Generator:
    """Makes items of a kind at a target length (prompt tokens, counted by count_tokens on the
    user message). count_tokens defaults to a rough 4-characters-a-token estimate."""

    def __init__(self, st=None, count_tokens=None, repeat=0.0):
        self.st = st or SuiteText()
        self.repeat = repeat
        self.count = count_tokens or (lambda text: max(1, len(text) // 4))
        self.tokens_per_sentence = 16.0  # refined as items are made

    # -- the parts of one item, given a sentence count -----------------------------------------
    def _build(self, kind, seed, n_sent, depth, n_facts):
        st, rng = self.st, random.Random(seed)
        content = random.Random(seed * 7919 + 17)  # needles/questions do not change with n_sent
        item = {"kind": kind, "task": TASK_OF_KIND[kind], "depth": depth}
        if kind in ("niah_single", "niah_multikey", "niah_multiquery"):
            n_keys = {"niah_single": 1, "niah_multikey": 4, "niah_multiquery": 4}[kind]
            keys = distinct(content, st.key, n_keys)
            values = distinct(content, st.value, n_keys)
            depths = [depth] + [content.random() for _ in range(n_keys - 1)]
            needles = [(d, st.fill(st.needles["single"], rng, {"key": k, "value": v}))
                       for d, k, v in zip(depths, keys, values)]
            if kind == "niah_multiquery":
                asked = [0, 1 + content.randrange(n_keys - 1)]
                ks = [keys[i] for i in asked]
                item["question"] = st.fill(st.questions["multiquery"], rng, {"keys": " and ".join(ks)})
                item["expected"] = [values[i] for i in asked]
                item["reference"] = st.answers["multiquery_separator"].join(
                    st.fill(st.answers["single"], rng, {"key": keys[i], "value": values[i]}) for i in asked)
            else:
                item["question"] = st.fill(st.questions["single"], rng, {"key": keys[0]})
                item["expected"] = [values[0]]
                item["reference"] = st.fill(st.answers["single"], rng, {"key": keys[0], "value": values[0]})
            item["text"] = join_sentences(insert_needles(rng, st, n_sent, needles, self.repeat), rng)
        elif kind == "niah_multivalue":
            key = st.key(content)
            values = distinct(content, st.value, 4)
            depths = sorted([depth] + [content.random() for _ in range(3)])
            needles = [(d, st.fill(st.needles["single"], rng, {"key": key, "value": v})) for d, v in zip(depths, values)]
            item["question"] = st.fill(st.questions["multivalue"], rng, {"key": key})
            item["expected"] = values
            item["reference"] = st.fill(st.answers["multivalue"], rng, {"key": key, "values": st.list_sep.join(values)})
            item["text"] = join_sentences(insert_needles(rng, st, n_sent, needles, self.repeat), rng)
        elif kind == "vt":
            value, other = distinct(content, st.value, 2)
            names = distinct(content, st.var, 10)
            chains = [(names[:5], value), (names[5:], other)]
            needles = []
            for ci, (vs, val) in enumerate(chains):
                lo = depth * 0.5 if ci == 0 else 0.0
                ds = sorted(lo + (1 - lo) * content.random() for _ in range(len(vs)))
                if ci == 0:
                    ds[0] = depth * 0.5
                for i, (d, v) in enumerate(zip(ds, vs)):
                    t = (st.fill(st.needles["vt_first"], rng, {"var": v, "value": val}) if i == 0 else
                         st.fill(st.needles["vt_next"], rng, {"var": v, "prev": vs[i - 1]}))
                    needles.append((d, t))
            item["question"] = st.fill(st.questions["vt"], rng, {"value": value})
            item["expected"] = list(names[:5])
            item["text"] = join_sentences(insert_needles(rng, st, n_sent, needles, self.repeat), rng)
        elif kind == "mdqa":
            n_docs = max(2, min(12, n_sent // 25))
            titles = distinct(content, lambda r: st.fill(st.needles["title"], r), n_docs)
            values = distinct(content, st.value, n_docs)
            target = min(n_docs - 1, int(depth * n_docs))
            per = max(3, n_sent // n_docs)
            docs = []
            for i in range(n_docs):
                fact = st.fill(st.needles["mdqa"], rng, {"title": titles[i], "value": values[i]})
                body = join_sentences(insert_needles(rng, st, per, [(content.random(), fact)], self.repeat), rng)
                docs.append({"title": titles[i], "text": body})
            item["documents"] = docs
            item["question"] = st.fill(st.questions["mdqa"], rng, {"title": titles[target]})
            item["expected"] = [values[target]]
            item["reference"] = st.fill(st.answers["mdqa"], rng, {"title": titles[target], "value": values[target]})
            item["depth"] = target / max(1, n_docs - 1)
        elif kind == "summary":
            facts = []
            while len(facts) < n_facts:
                f = st.fill(st.needles["fact"], content)
                if f not in facts:
                    facts.append(f)
            depths = sorted([depth] + [content.random() for _ in range(n_facts - 1)])
            needles = [(d, st.fill(st.needles["summary"], rng, {"fact": f})) for d, f in zip(depths, facts)]
            item["text"] = join_sentences(insert_needles(rng, st, n_sent, needles, self.repeat), rng)
            item["expected"] = facts
        else:
            raise ValueError(f"unknown kind {kind}")
        if "reference" not in item:  # vt and summary: the items themselves
            sep = st.summary_sep if kind == "summary" else st.list_sep
            item["reference"] = sep.join(item["expected"])
        return item

    def make(self, kind, seed, target_tokens, depth=None, n_facts=None, doc_id=None):
        """One item whose user message is at most target_tokens tokens (and close to it)."""
        rng = random.Random(seed * 31 + 5)
        if depth is None:
            depth = rng.random()
        if n_facts is None:
            n_facts = rng.randint(3, 5)
        n = max(4, int(target_tokens / self.tokens_per_sentence))
        best = None
        for _ in range(6):
            item = self._build(kind, seed, n, depth, n_facts)
            used = self.count(user_message(self.st, item))
            if used <= target_tokens:
                best = (item, used)
                if used >= 0.93 * target_tokens:
                    break
            per = used / max(1, n)
            self.tokens_per_sentence = 0.8 * self.tokens_per_sentence + 0.2 * per
            n_new = max(4, int(n * target_tokens * 0.97 / used))
            if n_new == n:
                n_new = n - 1 if used > target_tokens else n + 1
            if n_new < 4:
                break
            n = n_new
        if best is None:
            item = self._build(kind, seed, 4, depth, n_facts)
            best = (item, self.count(user_message(self.st, item)))
        item, used = best
        item["length"] = target_tokens
        item["prompt_tokens"] = used
        item["doc_id"] = doc_id or f"{kind}-{target_tokens}-{seed}"
        return item


def user_message(st, item):
    """The user turn of the chat, per job task (the Spark job's prompt for this row)."""
    task = item["task"]
    if task == "qa":
        return st.prompts["qa"].replace("{text}", item["text"]).replace("{question}", item["question"])
    if task == "summary":
        return st.prompts["summary"].replace("{text}", item["text"])
    if task == "multi_doc_qa":
        parts = [st.prompts["multi_doc_qa_document"].replace("{index}", str(i + 1)).replace("{title}", d["title"])
                 .replace("{text}", d["text"]) for i, d in enumerate(item["documents"])]
        docs = st.prompts["multi_doc_qa_separator"].join(parts)
        return st.prompts["multi_doc_qa"].replace("{documents}", docs).replace("{question}", item["question"])
    raise ValueError(f"unknown task {task}")


# -- scoring (the Java twin is io.longsieve.eval.Scoring) --------------------------------------------

def normalise(s):
    return " ".join(s.strip().split()).rstrip(".").strip().lower()


def score(kind, expected, output, reference=None):
    """Exact match for one answer (the whole reference sentence, or the bare value); recall of the
    items for lists; in-order recall for the summary."""
    out = " ".join(output.split()).lower()
    if len(expected) == 1 and kind != "summary":
        got = normalise(output)
        return 1.0 if got == normalise(expected[0]) or (reference is not None and got == normalise(reference)) else 0.0
    if kind == "summary":
        pos, hits = 0, 0
        for e in expected:
            f = " ".join(e.split()).lower()
            i = out.find(f, pos)
            if i >= 0:
                hits += 1
                pos = i + len(f)
        return hits / len(expected)
    return sum(1 for e in expected if e.lower() in out) / len(expected)


def training_mix():
    return [("niah_single", 0.2), ("niah_multikey", 0.15), ("niah_multivalue", 0.1), ("niah_multiquery", 0.1),
            ("vt", 0.15), ("mdqa", 0.15), ("summary", 0.15)]


def pick_kind(rng):
    r, acc = rng.random(), 0.0
    for k, w in training_mix():
        acc += w
        if r < acc:
            return k
    return KINDS[-1]


def it_count_needles(it):
    """Needle markers an item carries (repeats never copy a needle); "VAR " twice in a chained statement."""
    return {"niah_single": 1, "niah_multikey": 4, "niah_multiquery": 4, "niah_multivalue": 4, "vt": 18,
            "mdqa": len(it.get("documents", [])), "summary": len(it["expected"])}[it["kind"]] + (
        1 if it["kind"] in ("niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "mdqa") else 0)


def self_check(st):
    """Checks that need no tokenizer: markers only in needles, answers present in the documents,
    determinism, lengths roughly on target, scorer basics."""
    rng = random.Random(0)
    for _ in range(5000):
        s = st.sentence(rng)
        assert not any(m in s for m in MARKERS), s
        assert "{" not in s and "}" not in s, s
    g = Generator(st)
    for kind in KINDS:
        for target in (300, 2000, 8000):
            for seed in range(3):
                it = g.make(kind, seed, target, depth=seed / 2)
                again = Generator(st).make(kind, seed, target, depth=seed / 2)
                assert user_message(st, it) == user_message(st, again) or True  # length search may differ by warm-up
                msg = user_message(st, it)
                assert it["prompt_tokens"] <= target, (kind, target, it["prompt_tokens"])
                assert it["prompt_tokens"] >= 0.6 * target or target < 400, (kind, target, it["prompt_tokens"])
                for e in it["expected"]:
                    assert e in msg, (kind, e)
                assert score(kind, it["expected"], it["reference"], it["reference"]) == 1.0, (kind, it["reference"])
                assert score(kind, it["expected"], "nothing") == 0.0
    # same generator state -> same document
    a = Generator(st, count_tokens=lambda t: len(t) // 4)
    b = Generator(st, count_tokens=lambda t: len(t) // 4)
    for kind in KINDS:
        assert user_message(st, a.make(kind, 7, 1000)) == user_message(st, b.make(kind, 7, 1000))
    assert score("niah_single", ["1234567"], " 1234567.") == 1.0
    assert score("niah_single", ["1234567"], "The special magic number for a-b is 1234567.",
                 "The special magic number for a-b is 1234567.") == 1.0
    assert score("niah_single", ["1234567"], "The special magic number for a-c is 1234567.",
                 "The special magic number for a-b is 1234567.") == 0.0
    rep_gen = Generator(st, repeat=0.3)
    for kind in KINDS:
        it = rep_gen.make(kind, 3, 1500)
        assert score(kind, it["expected"], it["reference"], it["reference"]) == 1.0
        msg = user_message(st, it)
        assert sum(msg.count(m) for m in MARKERS) == sum(it_count_needles(it) for _ in [0]), (kind, msg[:200])
    assert score("niah_multivalue", ["1", "2", "3", "4"], "1, 2") == 0.5
    assert score("summary", ["a b.", "c d."], "c d.\na b.") == 0.5
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", default=DEFAULT_TEXT)
    ap.add_argument("--self-check", action="store_true")
    ap.add_argument("--sample", help="write a JSONL of one item per kind (rough token counts) to this path")
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--demo", help="write demo documents (Spark job input: doc_id, task, text|documents, question, "
                                   "reference) of about --tokens tokens to this path")
    args = ap.parse_args()
    st = SuiteText(args.text)
    if args.self_check:
        self_check(st)
        print("suite self-check ok")
    if args.sample:
        g = Generator(st)
        with open(args.sample, "w", encoding="utf-8") as f:
            for i, kind in enumerate(KINDS):
                it = g.make(kind, 100 + i, args.tokens, depth=0.5)
                it["user_message"] = user_message(st, it)
                f.write(json.dumps(it, ensure_ascii=False) + "\n")
        print("wrote", args.sample)
    if args.demo:
        g = Generator(st)
        plan = [("niah_single", 4), ("niah_multikey", 3), ("mdqa", 4), ("summary", 3), ("vt", 2),
                ("niah_multivalue", 2), ("niah_multiquery", 2)]
        with open(args.demo, "w", encoding="utf-8") as f:
            for kind, n in plan:
                for i in range(n):
                    it = g.make(kind, 2026 + 10 * i, args.tokens, depth=(i + 0.5) / n, doc_id=f"{kind}-{i + 1}")
                    row = {k: it[k] for k in ("doc_id", "task", "text", "documents", "question", "reference") if k in it}
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
        print("wrote", args.demo)


if __name__ == "__main__":
    sys.exit(main())
