#!/usr/bin/env python3
"""The quality suite's documents: RULER-style tasks in generated haystacks of several kinds.

Plain Python (no torch), so it runs anywhere: the training script imports it to make training
documents, and `python3 tools/train/suite.py --self-check` tests it on a machine without torch.
Text comes from files shared with the Java suite (io.longsieve.eval.SuiteText), under
gpu-engine/src/main/resources/io/longsieve/eval/:
  suite-text.json     the training family: word lists, haystack kinds, needle, question and answer
                      formats, prompt layouts;
  suite-heldout.json  the held-out family: needle phrasings, question phrasings and haystack kinds
                      that training never reads; `--held-out` builds every task from it (word lists,
                      answer formats and prompts stay the training file's).

An item is a dict in the Spark job's input format plus what the scorer needs:
  doc_id, task (qa | multi_doc_qa | summary), text or documents [{title, text}], question,
  reference (the exact answer text the model is trained to write), kind, expected (answer items),
  depth (0..1, where the needle or the asked-about part sits), length (target prompt tokens),
  family (train | heldout), haystack (the haystack kind).
"""

import argparse
import json
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EVAL_DIR = os.path.join(HERE, "..", "..", "gpu-engine", "src", "main", "resources", "io", "longsieve", "eval")
DEFAULT_TEXT = os.path.join(EVAL_DIR, "suite-text.json")
HELD_OUT_NAME = "suite-heldout.json"  # read only by SuiteText(held_out=...), never by the training data path

KINDS = ["niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "vt", "mdqa", "summary"]
TASK_OF_KIND = {"niah_single": "qa", "niah_multikey": "qa", "niah_multivalue": "qa", "niah_multiquery": "qa",
                "vt": "qa", "mdqa": "multi_doc_qa", "summary": "summary"}
SLOT = re.compile(r"\{([a-z0-9_]+)\}")
FAMILY_SECTIONS = ("haystack", "needles", "questions")  # what the held-out file replaces


def held_out_path(text_path=DEFAULT_TEXT):
    """The held-out family's file, next to the training text file."""
    return os.path.join(os.path.dirname(os.path.abspath(text_path)), HELD_OUT_NAME)


class SuiteText:
    """The shared templates and word lists, and how slots are filled. held_out: the path of a
    held-out family file whose haystack, needles and questions replace the training ones."""

    def __init__(self, path=DEFAULT_TEXT, held_out=None):
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        self.family = "train"
        if held_out is not None:
            with open(held_out, encoding="utf-8") as f:
                h = json.load(f)
            for section in FAMILY_SECTIONS:
                d[section] = h[section]
            self.family = "heldout"
        self.words = d["words"]
        self.haystack = d["haystack"]          # kind -> {"join": "paragraphs" | "lines", "templates": [...]}
        self.hay_kinds = list(self.haystack)
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

    def sentence(self, rng, kind):
        return self.fill(rng.choice(self.haystack[kind]["templates"]), rng)

    def key(self, rng):
        return rng.choice(self.words["keyadj"]) + "-" + rng.choice(self.words["keynoun"])

    @staticmethod
    def value(rng):
        return str(rng.randint(1000000, 9999999))

    @staticmethod
    def var(rng):
        return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5))


def join_sentences(sentences, rng, mode="paragraphs"):
    """Sentences into paragraphs of 3..7 sentences, or one per line (lists, tables, logs, code)."""
    if mode == "lines":
        return "\n".join(sentences)
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


def insert_needles(rng, st, hay_kind, n_sentences, needles_at, repeat=0.0):
    """Haystack of n_sentences of one kind with needles inserted. needles_at: [(depth, text)], kept in
    order of depth (ties keep the given order). repeat: the chance that a haystack sentence repeats an
    earlier one (training only: copying repeated text teaches the model to copy)."""
    hay = []
    for i in range(n_sentences):
        hay.append(hay[rng.randrange(i)] if i > 2 and repeat > 0 and rng.random() < repeat
                   else st.sentence(rng, hay_kind))
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


# -- procedural phrasings (training only) ------------------------------------------------------------
# Run 3 learnt the 24 needle phrasings of suite-text.json instead of retrieval (issue 19). Training
# documents may instead compose a needle from a prefix, a connector and a suffix (or write it as a
# record), and a question from an opener, a core and a closer: hundreds of phrasings, so the model
# cannot memorise them. The only slots are the given ones ({key}, {value}, {key_b}, {title}; {var},
# {prev}, {fact} in PROC_VT and PROC_SUMMARY), so every composed phrase holds the answer verbatim and
# suite_oracle can read it back (oracle_templates below).
# None of this text may look like the held-out family: check_procedural_separation enforces it.

PROC_PREFIXES = ["", "Note:", "Remember that", "For the record,", "FYI -", "Keep in mind:", "Heads up:",
                 "By the way,", "Reminder:", "Useful detail:", "As noted before,", "One more thing:",
                 "To be clear,", "PS:", "Quick fact.", "Do not forget:"]
PROC_KV = ["{key} is {value}", "the code for {key}: {value}", "{key} = {value}", "{key} maps to {value}",
           "the number for {key} is {value}", "{key} has the value {value}", "{key} corresponds to {value}",
           "the key {key} unlocks {value}", "{key} was set to {value}", "{key} gets the number {value}",
           "the value of {key} is {value}", "{key} is paired with {value}", "{key}'s number is {value}",
           "{key} points to {value}", "look up {key} and you find {value}", "{key} resolves to {value}",
           "{key} stores {value}", "{key} carries {value}", "the entry for {key} reads {value}",
           "{key} equals {value}", "the secret of {key} is {value}", "{key} is linked to {value}",
           "{key} takes the value {value}", "under {key} you will find {value}", "{key} is written as {value}"]
PROC_VK = ["{value} is what {key} stands for", "{value} belongs to {key}", "{value} is the number for {key}",
           "{value} goes with {key}", "{value} was assigned to {key}", "{value} is the code of {key}",
           "{value} is kept under {key}", "{value} answers for {key}", "{value} is the value of {key}",
           "{value} is linked to {key}", "the number {value} is for {key}", "{value} is stored for {key}",
           "{value} marks {key}"]
PROC_SUFFIXES = ["", ".", " (keep this).", ", remember it.", "!", " - noted.", ". Keep it safe.", ", for later.",
                 " (important).", ". Do not lose it."]
PROC_RECORDS = ["- {key}: {value}", "* {key}: {value}", "| {key} | {value} |",
                "{\"key\": \"{key}\", \"value\": \"{value}\"}", "{\"id\": \"{key}\", \"number\": {value}}",
                "{key}={value}", "INFO store {key}={value}", "[entry] {key}={value}"]
PROC_RECORD_SHARE = 0.2  # about 1 needle in 5 is a record line rather than a sentence

PROC_Q_OPENERS = ["", "Quick check:", "Based on the document,", "From the text above,", "Please answer:",
                  "Looking at the document,", "One thing to find:", "In the document above,"]
PROC_Q_CLOSERS = ["", " Be brief.", " Copy it exactly.", " (from the document)"]
PROC_QUESTIONS = {
    "single": ["what is the value of {key}?", "which number goes with {key}?", "what number is stored for {key}?",
               "give the number for {key}.", "what is {key}?", "what does {key} map to?", "{key} -> ?",
               "what value was noted for {key}?", "which number is paired with {key}?", "look up {key}."],
    "multivalue": ["what are all the values of {key}?", "give every number stored for {key}.",
                   "list all numbers that go with {key}.", "which numbers are paired with {key}? List them all."],
    "multiquery": ["what are the values of {key} and {key_b}?", "give the numbers for {key} and {key_b}.",
                   "which numbers go with {key} and with {key_b}?", "{key} and {key_b}: which numbers?"],
    "vt": ["which variables hold {value}?", "list the variables that hold {value}.",
           "which variables carry {value}, directly or by copying?", "what variables have the value {value} in the end?"],
    "mdqa": ["what is the number in the {title}?", "which code does the {title} hold?",
             "give the number from the {title}.", "{title} -> which number?"],
}
# variable tracking and summaries: more assignment styles and fact markers, drawn per document
PROC_VT = [{"first": "{var} keeps {value}.", "next": "{var} keeps whatever {prev} keeps."},
           {"first": "define {var} as {value}", "next": "define {var} as {prev}"},
           {"first": "{var} starts at {value}.", "next": "{var} is a copy of {prev}."},
           {"first": "mov {var}, {value}", "next": "mov {var}, {prev}"},
           {"first": "put {value} into {var}.", "next": "put {prev} into {var}."},
           {"first": "{var} is bound to {value}.", "next": "{var} is bound to {prev}."}]
PROC_SUMMARY = ["Fact to keep: {fact}", "Main fact - {fact}", "(fact) {fact}", "Noted: {fact}", "Takeaway: {fact}",
                "Essential: {fact}", "Record this: {fact}", ">> {fact}", "Key point: {fact}", "Fact noted: {fact}"]


def _capitalised(core):
    """A core that opens a sentence starts with a capital; a slot is never touched (keys are copied)."""
    return core[0].upper() + core[1:] if core[0].isalpha() else core


def _bodies(prefixes, cores):
    """Every prefix + core, precomputed once so composing costs two choices and a few replaces."""
    return [p + " " + c if p and not p.endswith(".") else (p + " " if p else "") + _capitalised(c)
            for p in prefixes for c in cores]


PROC_NEEDLE_BODIES = _bodies(PROC_PREFIXES, PROC_KV + PROC_VK)
PROC_QUESTION_BODIES = {k: _bodies(PROC_Q_OPENERS, cores) for k, cores in PROC_QUESTIONS.items()}


def _put(template, given):
    for slot, text in given.items():
        template = template.replace("{" + slot + "}", text)
    return template


def compose_needle(rng, key, value):
    """One composed needle sentence (or record line) stating key -> value; microseconds."""
    if rng.random() < PROC_RECORD_SHARE:
        return _put(rng.choice(PROC_RECORDS), {"key": key, "value": value})
    return _put(rng.choice(PROC_NEEDLE_BODIES) + rng.choice(PROC_SUFFIXES), {"key": key, "value": value})


def compose_question(rng, qkind, given):
    """One composed question of a kind (single, multivalue, multiquery, vt, mdqa) with its slots filled."""
    return _put(rng.choice(PROC_QUESTION_BODIES[qkind]) + rng.choice(PROC_Q_CLOSERS), given)


def procedural_parts():
    """How many parts the composed phrasings draw from (for the training metadata and the card)."""
    return {"prefixes": len(PROC_PREFIXES), "kv_connectors": len(PROC_KV), "vk_connectors": len(PROC_VK),
            "suffixes": len(PROC_SUFFIXES), "records": len(PROC_RECORDS), "record_share": PROC_RECORD_SHARE,
            "question_openers": len(PROC_Q_OPENERS), "question_closers": len(PROC_Q_CLOSERS),
            "question_cores": {k: len(v) for k, v in PROC_QUESTIONS.items()},
            "vt_styles": len(PROC_VT), "summary_markers": len(PROC_SUMMARY), "haystacks": procedural_hay_parts()}


def oracle_templates():
    """What suite_oracle searches for in a procedural document: each connector and question core in
    both cases (a prefix or an opener comes before it, a suffix after; the search ignores them)."""
    def both(cores):
        return sorted({c for core in cores for c in (core, _capitalised(core))})
    out = {"kv": both(PROC_KV + PROC_VK + PROC_RECORDS), "vt": list(PROC_VT), "summary": list(PROC_SUMMARY)}
    out["questions"] = {k: both(v) for k, v in PROC_QUESTIONS.items()}
    return out


# -- procedural haystacks (training only) ------------------------------------------------------------
# Run 4 composed needles and questions and still scored 8% on the held-out family: its copies break
# off or pick a wrong number inside haystack kinds it never saw (issue 19). So a training document's
# haystack is, with the same procedural share, built from training-only kinds (PROC_HAY), from segments
# of 2-4 kinds (old and new) that switch every few lines, and with random layout noise; the model
# should find the needle whatever surrounds it. None of these kinds looks like a held-out one (no chat,
# no comma rows, no recipes, no news): check_hay_separation enforces it. Their numbers are at most 4
# digits ({n}, {n3}, {pct}, {year}, {hex}: 4 hex letters), so no 7-digit value can be misread; no
# template has 5 capitals in a row (a variable) or a key.

PROC_HAY = {
    "config": {"join": "lines", "templates": [
        "[{noun}]", "[{adj}_{noun}]", "{noun}_limit: {n}", "{adj}_{noun} = {n3}", "path: /srv/{noun}/{noun2}",
        "enabled: {adj}", "# settings for the {noun} in {place}", "timeout_{noun}: {n}s", "owner = {name}",
        "retries: {n}", "mirror: {place}.{noun}.local", "cache_{noun}_pct = {pct}"]},
    "outline": {"join": "lines", "templates": [
        "# The {adj} {noun}", "## {noun} in {place}", "### {month} {year}", "- {verb} the {noun}",
        "  - {adj} {noun2}", "1. look at the {noun}", "**{noun}**: {adj} and {weather}", "- [ ] {verb} the {noun2}",
        "- [x] {noun} for {name}", "_{adj}_ notes on the {noun}"]},
    "trace": {"join": "lines", "templates": [
        "Traceback (most recent call last):", "  File /srv/{noun}/{noun2}.py line {n3} in {adj}_{noun}",
        "    at {noun}.{noun2}.run({noun}.java:{n3})", "{noun}Error: the {adj} {noun2} was not {verb}",
        "Caused by: {noun} timeout after {n} s", "  ... {n} more", "panic: {noun} {verb} twice at 0x{hex}",
        "    #{n} 0x{hex} in {noun}_{adj} ()", "core dumped ({noun} worker {n})"]},
    "citations": {"join": "lines", "templates": [
        "{name} ({year}). The {adj} {noun}. {place}: {noun2} Press.",
        "[{n}] {name} and {name2}. On the {noun} of {place}. Journal of {noun2}s {n}({n}): {n3}-{n3}.",
        "{name}. {adj} {noun}s in {month} {year}. Proc. {place} {noun2} meeting. pp. {n}-{n3}.",
        "See also {name} ({year}) on the {noun}.", "[{n}] {name} et al. A {adj} {noun}. {year}."]},
    "timetable": {"join": "lines", "templates": [
        "{hour}:{min}  {noun} at {place}", "{hour}:{min}-{hour}:{min}  {adj} {noun} with {name}",
        "Platform {n}  {place} > {place2}  dep {hour}:{min}", "{month} {day}  closed for the {noun}",
        "Mon-Fri {hour}:{min}  {noun2} opens", "week {n}: {adj} {noun} in room {n3}"]},
    "ledger": {"join": "lines", "templates": [
        "#{n3}  {noun}  qty {n}  bin {hex}", "{year}/{day}  {food}  {n3} kg  in stock",
        "sku {hex}  {adj} {noun}  x{n}", "balance b/f  {n3}.{min}", "{month} {day}  paid {name}  {n3}.{min}",
        "total {noun}s  {n3}", "lot {n}  {food}  {pct}% sold"]},
    "verse": {"join": "lines", "templates": [
        "the {adj} {noun} of {place}", "and {weather} skies", "{name} {verb} the {noun2}", "o {noun}, so {adj}",
        "in {month} again", "where the {noun}s go", "slow as the {noun}", "{weather}, {weather}, {adj}"]},
    "glossary": {"join": "paragraphs", "templates": [
        "{noun} (n.): a {adj} {noun2} kept near {place}.", "{adj} (adj.): like a {noun} on a {weather} day.",
        "{verb} (v.): what {name} did to the {noun}.", "{noun2}, see {noun}.",
        "{place} (place): a town known for its {food}."]},
    "shell": {"join": "lines", "templates": [
        "$ cd /srv/{noun}", "$ ls {noun2}/", "{noun}.txt  {noun2}.log  {adj}.md", "$ grep -c {noun} {noun2}.log",
        "{n3} matching lines", "$ du -sh {noun}", "{n3}M  {noun}/", "$ git log --oneline -{n}", "{hex} fix the {adj} {noun}",
        "$ echo done", "done"]},
}
HAY_SEPARATORS = ["---", "===", "***", "* * *", "~~~", "#"]
HAY_MIXED_SHARE = 0.6   # a procedural haystack is mixed (2-4 kinds) this often, else one new kind


_SPLIT = {}  # template -> [literal, slot, literal, ...]: split once, so a line costs a join, not a regex


def _hay_sentence(st, rng, kinds, kind):
    """One haystack line; a faster fill than SuiteText.fill (same slots, same-slot-twice rule); its draws
    need not match st.fill's, since only procedural (p > 0) documents use it."""
    t = rng.choice(kinds[kind]["templates"])
    parts = _SPLIT.get(t)
    if parts is None:
        parts = _SPLIT[t] = SLOT.split(t)
    out, picked = list(parts), {}
    for i in range(1, len(out), 2):
        s = out[i]
        if s not in picked:
            if s == "hex":  # 4 lowercase hex letters: a random token that is never a 7-digit value
                picked[s] = "".join(rng.choice("0123456789abcdef") for _ in range(4))
            else:
                picked[s] = st._slot(s, rng)
        out[i] = picked[s]
    return "".join(out)


def hay_plan(st, seed, p):
    """The procedural haystack of a document (None: one of the family's kinds, as before). Its own
    random stream, drawn only when p > 0, so p = 0 documents and the other draws stay as they were."""
    if p <= 0:
        return None
    r = random.Random(seed * 104729 + 31)
    if r.random() >= p:
        return None
    if r.random() < HAY_MIXED_SHARE:
        pool = st.hay_kinds + list(PROC_HAY)
        kinds = r.sample(pool, r.randint(2, 4))
    else:
        kinds = [r.choice(list(PROC_HAY))]
    return {"kinds": kinds, "seg": (r.randint(1, 3), r.randint(4, 9)),
            "indent": r.choice([0, 0, 2, 4, 8]), "blank": r.choice([0.0, 0.0, 0.1, 0.25]),
            "sep": r.choice([None, None] + HAY_SEPARATORS), "wrap": r.choice([0, 0, 0, 40, 60, 80, 100])}


def hay_name(plan):
    return "+".join(plan["kinds"]) if len(plan["kinds"]) > 1 else plan["kinds"][0]


def _wrap(parts, width):
    """Greedy line wrap of haystack sentences at width; a needle is one unit, never broken."""
    lines, cur = [], ""
    for text, atomic in parts:
        for w in ([text] if atomic else text.split(" ")):
            if cur and len(cur) + 1 + len(w) > width:
                lines.append(cur)
                cur = w
            else:
                cur = cur + " " + w if cur else w
    if cur:
        lines.append(cur)
    return "\n".join(lines)


def _render_segment(rng, plan, mode, elems):
    """One segment's elements [(text, is_needle)] in its kind's layout plus the plan's noise."""
    if mode == "paragraphs":
        if plan["wrap"]:
            return _wrap(elems, plan["wrap"])
        return join_sentences([t for t, _ in elems], rng, "paragraphs")
    pad = " " * plan["indent"]
    out = []
    for t, _ in elems:
        if out and plan["blank"] and rng.random() < plan["blank"]:
            out.append("")
        out.append(pad + t if pad and rng.random() < 0.5 else t)
    return "\n".join(out)


def procedural_hay(rng, st, plan, n_sentences, needles_at, repeat=0.0):
    """A haystack of n_sentences in segments of the plan's kinds (a new kind every few lines), needles
    inserted as whole elements (insert_needles' placement), so a segment boundary never splits one."""
    kinds = {**st.haystack, **PROC_HAY}
    hay, seg_of, segs = [], [], []
    lo, hi = plan["seg"]
    while len(hay) < n_sentences:
        options = [k for k in plan["kinds"] if not segs or k != segs[-1]] or plan["kinds"]
        segs.append(rng.choice(options))
        for _ in range(min(rng.randint(lo, hi) if len(plan["kinds"]) > 1 else n_sentences, n_sentences - len(hay))):
            i = len(hay)
            hay.append(hay[rng.randrange(i)] if i > 2 and repeat > 0 and rng.random() < repeat
                       else _hay_sentence(st, rng, kinds, segs[-1]))
            seg_of.append(len(segs) - 1)
    elems = [(t, False, s) for t, s in zip(hay, seg_of)]
    placed = sorted(enumerate(needles_at), key=lambda t: (t[1][0], t[0]))
    for shift, (_, (depth, text)) in enumerate(placed):
        idx = min(len(hay), int(round(depth * n_sentences))) + shift
        seg = elems[idx - 1][2] if idx > 0 else (elems[0][2] if elems else 0)
        elems.insert(idx, (text, True, seg))
    blocks, start = [], 0
    for j in range(1, len(elems) + 1):
        if j == len(elems) or elems[j][2] != elems[start][2]:
            mode = kinds[segs[elems[start][2]]]["join"]
            blocks.append(_render_segment(rng, plan, mode, [(t, a) for t, a, _ in elems[start:j]]))
            start = j
    sep = "\n\n" + plan["sep"] + "\n\n" if plan["sep"] else "\n\n"
    return sep.join(blocks)


def procedural_hay_parts():
    return {"kinds": len(PROC_HAY), "templates": sum(len(k["templates"]) for k in PROC_HAY.values()),
            "mixed_share": HAY_MIXED_SHARE, "separators": len(HAY_SEPARATORS)}


class Generator:
    """Makes items of a kind at a target length (prompt tokens, counted by count_tokens on the
    user message). count_tokens defaults to a rough 4-characters-a-token estimate. Every item
    draws its haystack kind, needle phrasings and question phrasing from the SuiteText's family.
    procedural: the chance that a needle or a question is composed (compose_needle, compose_question)
    instead of drawn from the family's templates, and, drawn apart, that the haystack is procedural
    (hay_plan: training-only kinds, mixed segments, layout noise); training only. At 0 no extra random draw is made, so
    evaluation documents, goldens and demo documents are the same as without it."""

    def __init__(self, st=None, count_tokens=None, repeat=0.0, procedural=0.0):
        self.st = st or SuiteText()
        if repeat > 0 and self.st.family != "train":
            raise ValueError("copy-rich (repeat > 0) haystacks are for training; the held-out family is for evaluation")
        if procedural > 0 and self.st.family != "train":
            raise ValueError("procedural phrasings are for training; the held-out family is for evaluation")
        self.repeat = repeat
        self.procedural = procedural
        self.count = count_tokens or (lambda text: max(1, len(text) // 4))
        self.tokens_per_sentence = {}  # haystack kind -> estimate, refined as items are made

    def _content(self, seed):
        """The draws that do not depend on the haystack size; the first is the haystack kind."""
        content = random.Random(seed * 7919 + 17)
        return content, content.choice(self.st.hay_kinds)

    def _composed(self, content):
        # no draw at all when procedural is 0: the p = 0 documents stay byte-for-byte the same
        return self.procedural > 0 and content.random() < self.procedural

    def _kv(self, content, rng, key, value):
        if self._composed(content):
            return compose_needle(content, key, value)
        return self.st.fill(content.choice(self.st.needles["kv"]), rng, {"key": key, "value": value})

    def _question(self, content, rng, qkind, given):
        if self._composed(content):
            return compose_question(content, qkind, given)
        return self.st.fill(content.choice(self.st.questions[qkind]), rng, given)

    def _answer(self, key, value):
        return self.st.fill(self.st.answers["single"], None, {"key": key, "value": value})

    # -- the parts of one item, given a sentence count -----------------------------------------
    def _build(self, kind, seed, n_sent, depth, n_facts):
        st, rng = self.st, random.Random(seed)
        content, hk = self._content(seed)
        mode = st.haystack[hk]["join"]
        plan = hay_plan(st, seed, self.procedural)

        def hay(n, needles):
            if plan:
                return procedural_hay(rng, st, plan, n, needles, self.repeat)
            return join_sentences(insert_needles(rng, st, hk, n, needles, self.repeat), rng, mode)

        item = {"kind": kind, "task": TASK_OF_KIND[kind], "depth": depth, "family": st.family,
                "haystack": hay_name(plan) if plan else hk}
        if kind in ("niah_single", "niah_multikey", "niah_multiquery"):
            n_keys = {"niah_single": 1, "niah_multikey": 4, "niah_multiquery": 4}[kind]
            keys = distinct(content, st.key, n_keys)
            values = distinct(content, st.value, n_keys)
            depths = [depth] + [content.random() for _ in range(n_keys - 1)]
            needles = [(d, self._kv(content, rng, k, v)) for d, k, v in zip(depths, keys, values)]
            if kind == "niah_multiquery":
                asked = [0, 1 + content.randrange(n_keys - 1)]
                item["question"] = self._question(content, rng, "multiquery",
                                                  {"key": keys[asked[0]], "key_b": keys[asked[1]]})
                item["expected"] = [values[i] for i in asked]
                item["reference"] = st.answers["multiquery_separator"].join(
                    self._answer(keys[i], values[i]) for i in asked)
            else:
                item["question"] = self._question(content, rng, "single", {"key": keys[0]})
                item["expected"] = [values[0]]
                item["reference"] = self._answer(keys[0], values[0])
            item["text"] = hay(n_sent, needles)
        elif kind == "niah_multivalue":
            key = st.key(content)
            values = distinct(content, st.value, 4)
            depths = sorted([depth] + [content.random() for _ in range(3)])
            needles = [(d, self._kv(content, rng, key, v)) for d, v in zip(depths, values)]
            item["question"] = self._question(content, rng, "multivalue", {"key": key})
            item["expected"] = values
            item["reference"] = st.fill(st.answers["multivalue"], rng, {"key": key, "values": st.list_sep.join(values)})
            item["text"] = hay(n_sent, needles)
        elif kind == "vt":
            value, other = distinct(content, st.value, 2)
            names = distinct(content, st.var, 10)
            style = content.choice(PROC_VT if self._composed(content) else st.needles["vt"])
            chains = [(names[:5], value), (names[5:], other)]
            needles = []
            for ci, (vs, val) in enumerate(chains):
                lo = depth * 0.5 if ci == 0 else 0.0
                ds = sorted(lo + (1 - lo) * content.random() for _ in range(len(vs)))
                if ci == 0:
                    ds[0] = depth * 0.5
                for i, (d, v) in enumerate(zip(ds, vs)):
                    t = (st.fill(style["first"], rng, {"var": v, "value": val}) if i == 0 else
                         st.fill(style["next"], rng, {"var": v, "prev": vs[i - 1]}))
                    needles.append((d, t))
            item["question"] = self._question(content, rng, "vt", {"value": value})
            item["expected"] = list(names[:5])
            item["text"] = hay(n_sent, needles)
        elif kind == "mdqa":
            n_docs = max(2, min(12, n_sent // 25))
            titles = distinct(content, lambda r: st.fill(st.needles["title"], r), n_docs)
            values = distinct(content, st.value, n_docs)
            target = min(n_docs - 1, int(depth * n_docs))
            per = max(3, n_sent // n_docs)
            docs = []
            for i in range(n_docs):
                fact = self._kv(content, rng, titles[i], values[i])
                docs.append({"title": titles[i], "text": hay(per, [(content.random(), fact)])})
            item["documents"] = docs
            item["question"] = self._question(content, rng, "mdqa", {"title": titles[target]})
            item["expected"] = [values[target]]
            item["reference"] = st.fill(st.answers["mdqa"], rng, {"title": titles[target], "value": values[target]})
            item["depth"] = target / max(1, n_docs - 1)
        elif kind == "summary":
            marker = content.choice(PROC_SUMMARY if self._composed(content) else st.needles["summary"])
            facts = []
            while len(facts) < n_facts:
                f = st.fill(st.needles["fact"], content)
                if f not in facts:
                    facts.append(f)
            depths = sorted([depth] + [content.random() for _ in range(n_facts - 1)])
            needles = [(d, st.fill(marker, rng, {"fact": f})) for d, f in zip(depths, facts)]
            item["text"] = hay(n_sent, needles)
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
        plan = hay_plan(self.st, seed, self.procedural)
        hk = hay_name(plan) if plan else self._content(seed)[1]  # the per-sentence estimate's key
        per_sentence = self.tokens_per_sentence.get(hk, 16.0)
        n = max(4, int(target_tokens / per_sentence))
        best = None
        for _ in range(6):
            item = self._build(kind, seed, n, depth, n_facts)
            used = self.count(user_message(self.st, item))
            if used <= target_tokens:
                best = (item, used)
                if used >= 0.93 * target_tokens:
                    break
            per = used / max(1, n)
            per_sentence = 0.8 * per_sentence + 0.2 * per
            n_new = max(4, int(n * target_tokens * 0.97 / used))
            if n_new == n:
                n_new = n - 1 if used > target_tokens else n + 1
            if n_new < 4:
                break
            n = n_new
        self.tokens_per_sentence[hk] = per_sentence
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
    """Exact match for one answer (the whole reference, or the bare value); recall of the
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


# -- self-checks (no tokenizer needed) ---------------------------------------------------------------

def skeleton(template):
    """A template with its slots blurred: two templates with one skeleton are one phrasing."""
    return SLOT.sub("{}", template).strip().lower()


def family_templates(st):
    """Every phrasing a family owns: needle, question and haystack templates."""
    out = list(st.needles["kv"]) + [p[k] for p in st.needles["vt"] for k in ("first", "next")]
    out += list(st.needles["summary"]) + [st.needles["fact"], st.needles["title"]]
    out += [q for qs in st.questions.values() for q in qs]
    out += [t for h in st.haystack.values() for t in h["templates"]]
    return out


def check_family(st, both_needles):
    """Haystacks hold nothing a needle template (of either family) matches, no value, key or variable;
    every document is solvable by reading it; lengths on target; scoring basics."""
    import suite_oracle as O
    value, var = re.compile(r"\d{7}"), re.compile(r"[A-Z]{5}")
    key = re.compile(O.slot_pattern(st, "key"))
    rng = random.Random(0)
    for hk in st.hay_kinds:
        assert st.haystack[hk]["join"] in ("paragraphs", "lines"), hk
        for _ in range(1500):
            s = st.sentence(rng, hk)
            assert not SLOT.search(s) and not value.search(s) and not var.search(s) and not key.search(s), (hk, s)
            assert not any(p.search(s) for p in both_needles), (hk, s)
    g = Generator(st)
    seen_hay = set()
    for kind in KINDS:
        for target in (300, 2000, 8000):
            for seed in range(4):
                it = g.make(kind, seed, target, depth=seed / 3)
                msg = user_message(st, it)
                seen_hay.add(it["haystack"])
                assert it["family"] == st.family
                assert it["prompt_tokens"] <= target, (kind, target, it["prompt_tokens"])
                assert it["prompt_tokens"] >= 0.6 * target or target < 400, (kind, target, it["prompt_tokens"])
                assert O.solve(st, kind, msg) == it["expected"], (st.family, kind, it["haystack"], it["expected"])
                assert score(kind, it["expected"], it["reference"], it["reference"]) == 1.0, (kind, it["reference"])
                assert score(kind, it["expected"], "nothing") == 0.0
    a = Generator(st, count_tokens=lambda t: len(t) // 4)
    b = Generator(st, count_tokens=lambda t: len(t) // 4)
    for kind in KINDS:
        assert user_message(st, a.make(kind, 7, 1000)) == user_message(st, b.make(kind, 7, 1000))
    # phrasings are drawn per needle and per document: a few hundred small documents use all of them
    used_kv, used_q = set(), set()
    for seed in range(400):
        it = g.make("niah_multikey", 10_000 + seed, 200)
        seen_hay.add(it["haystack"])
        for t in st.needles["kv"]:
            if re.search(O.template_regex(st, t), it["text"]):
                used_kv.add(t)
        used_q.update(t for t in st.questions["single"] if re.fullmatch(O.template_regex(st, t), it["question"]))
    assert used_kv == set(st.needles["kv"]), set(st.needles["kv"]) - used_kv
    assert used_q == set(st.questions["single"]), set(st.questions["single"]) - used_q
    return seen_hay


def check_separation(train, held):
    """The held-out family shares no phrasing with the training file, training documents (copy-rich,
    as the training script makes them) never hold a held-out needle or question, and held-out
    documents never hold a training one."""
    import suite_oracle as O
    common = {skeleton(t) for t in family_templates(train)} & {skeleton(t) for t in family_templates(held)}
    assert not common, f"held-out phrasings also in the training text: {sorted(common)}"
    assert not set(train.hay_kinds) & set(held.hay_kinds), "haystack kind names must differ"
    held_patterns = O.needle_patterns(held) + O.question_patterns(held)
    plain, composed = Generator(train, repeat=0.2), Generator(train, repeat=0.2, procedural=0.6)
    for seed in range(150):
        g = composed if seed % 2 else plain  # as the training script makes them, and without composing
        it = g.make(KINDS[seed % len(KINDS)], 50_000 + seed, 1200)
        msg = user_message(train, it) + "\n" + it["reference"]
        hit = [p.pattern for p in held_patterns if p.search(msg)]
        assert not hit, (it["kind"], hit)
    train_patterns = O.needle_patterns(train) + O.question_patterns(train)
    gh = Generator(held)
    for seed in range(70):
        it = gh.make(KINDS[seed % len(KINDS)], 60_000 + seed, 1200)
        hit = [p.pattern for p in train_patterns if p.search(user_message(held, it))]
        assert not hit, ("held-out document holds a training phrasing", it["kind"], hit)
    for kwargs in ({"repeat": 0.2}, {"procedural": 0.6}):
        try:
            Generator(held, **kwargs)
            raise AssertionError(f"the held-out family must refuse training use ({kwargs})")
        except ValueError:
            pass
    check_procedural_separation(train, held)
    check_hay_separation(train, held)
    check_training_code_reads_no_held_out()


def composed_templates():
    """Every phrasing the procedural generator can write, slots unfilled (a few thousand)."""
    needles = [b + s for b in PROC_NEEDLE_BODIES for s in PROC_SUFFIXES] + PROC_RECORDS
    questions = [b + c for bodies in PROC_QUESTION_BODIES.values() for b in bodies for c in PROC_Q_CLOSERS]
    return needles, questions


def check_procedural_separation(train, held, seeds=300, per_seed=23):
    """No composed connector, record or question core is (or contains, or sits inside) a held-out
    template; no composed phrasing equals one; ~20,000 composed needles and questions with filled
    slots match no held-out needle or question regex."""
    import suite_oracle as O
    held_sk = {skeleton(t) for t in family_templates(held)}
    cores = PROC_KV + PROC_VK + PROC_RECORDS + [c for cs in PROC_QUESTIONS.values() for c in cs]
    cores += [p[k] for p in PROC_VT for k in ("first", "next")] + PROC_SUMMARY
    for c in cores:
        sk = skeleton(c)
        near = [h for h in held_sk if sk == h or sk in h or h in sk]
        assert not near, (c, near)
    needles, questions = composed_templates()
    same = {skeleton(t) for t in needles + questions} & held_sk
    assert not same, f"composed phrasings equal held-out ones: {sorted(same)}"
    held_patterns = O.needle_patterns(held) + O.question_patterns(held)
    n = 0
    for seed in range(seeds):
        rng = random.Random(70_000 + seed)
        for i in range(per_seed):
            key, key_b = distinct(rng, train.key, 2)
            value = train.value(rng)
            title = train.fill(train.needles["title"], rng)
            texts = [compose_needle(rng, key, value), compose_needle(rng, title, value)]
            qkind = list(PROC_QUESTIONS)[i % len(PROC_QUESTIONS)]
            texts.append(compose_question(rng, qkind, {"key": key, "key_b": key_b, "value": value, "title": title}))
            for t in texts:
                hit = [p.pattern for p in held_patterns if p.search(t)]
                assert not hit, (t, hit)
            n += len(texts)
    assert n >= 20_000, n
    return n


def check_hay_separation(train, held, per_kind=1500, n_docs=100):
    """The training-only haystack kinds (PROC_HAY): no template equals, contains or sits inside a
    held-out template or haystack template (skeletons, as for the composed needles); their lines hold
    no slot, value, variable or key and match no needle regex of either family nor a composed one, nor
    a held-out haystack template; ~100 training documents with p = 0.6 hold no held-out needle or
    question, and enough of them are procedural, mixed and single new kinds."""
    import suite_oracle as O
    assert not set(PROC_HAY) & (set(train.hay_kinds) | set(held.hay_kinds)), "haystack kind names must differ"
    held_sk = {skeleton(t) for t in family_templates(held)}
    for kind, h in PROC_HAY.items():
        assert h["join"] in ("paragraphs", "lines"), kind
        for t in h["templates"]:
            sk = skeleton(t)
            near = [x for x in held_sk if sk == x or sk in x or x in sk]
            assert not near, (kind, t, near)
            assert "Question:" not in t and "Document " not in t and "Answer:" not in t, t
    extra = oracle_templates()
    lookalikes = O.needle_patterns(train) + O.needle_patterns(held)
    lookalikes += [re.compile(O.template_regex(train, t)) for t in extra["kv"] + extra["summary"]]
    lookalikes += [re.compile(O.template_regex(train, p[k])) for p in extra["vt"] for k in ("first", "next")]
    held_hay = [re.compile(O.template_regex(held, t)) for h in held.haystack.values() for t in h["templates"]]
    value, var = re.compile(r"\d{7}"), re.compile(r"[A-Z]{5}")
    key = re.compile(O.slot_pattern(train, "key"))
    rng = random.Random(1)
    for kind in PROC_HAY:
        for _ in range(per_kind):
            s = _hay_sentence(train, rng, PROC_HAY, kind)
            assert not SLOT.search(s) and not value.search(s) and not var.search(s) and not key.search(s), (kind, s)
            assert not any(p.search(s) for p in lookalikes), (kind, s)
            assert not any(p.search(s) for p in held_hay), (kind, s)
    held_patterns = O.needle_patterns(held) + O.question_patterns(held)
    g = Generator(train, repeat=0.2, procedural=0.6)
    names = []
    for seed in range(n_docs):
        it = g.make(KINDS[seed % len(KINDS)], 90_000 + seed, 1200)
        names.append(it["haystack"])
        msg = user_message(train, it) + "\n" + it["reference"]
        hit = [p.pattern for p in held_patterns if p.search(msg)]
        assert not hit, (it["kind"], it["haystack"], hit)
    proc = [h for h in names if h not in train.hay_kinds]
    assert len(proc) >= 0.4 * n_docs and sum("+" in h for h in proc) >= 0.2 * n_docs, names
    assert sum(h in PROC_HAY for h in proc) >= 0.1 * n_docs, names
    return len(proc)


def check_procedural_documents(st, n=140):
    """Composed training documents (as the training script makes them) are solvable by reading."""
    import suite_oracle as O
    g = Generator(st, repeat=0.2, procedural=0.6)
    hays = set()
    for seed in range(n):
        kind = KINDS[seed % len(KINDS)]
        it = g.make(kind, 80_000 + seed, (300, 1200, 3000)[seed % 3])
        hays.add(it["haystack"])
        assert O.solve(st, kind, user_message(st, it), procedural=True) == it["expected"], \
            (kind, it["haystack"], it["question"])
        assert score(kind, it["expected"], it["reference"], it["reference"]) == 1.0, kind
    assert len(hays & set(PROC_HAY)) >= 5 and any("+" in h for h in hays), hays  # the new haystacks are exercised


def check_training_code_reads_no_held_out(path=os.path.join(HERE, "train_needle.py")):
    """train_needle.py makes its training data (tokenizer corpus, RowMaker, loader) from the
    training family only: the held-out family is named in its evaluation code and nowhere else."""
    import ast
    with open(path, encoding="utf-8") as f:
        src = f.read()
    assert HELD_OUT_NAME not in src, "train_needle.py must get the held-out path from suite.held_out_path()"
    tree = ast.parse(src)
    allowed = {"evaluate", "eval_families"}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.ClassDef)) and fn.name not in allowed:
            for node in ast.walk(fn):
                inner = isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node is not fn and node.name in allowed
                assert not inner, node.name
                names = ([node.id] if isinstance(node, ast.Name) else [node.attr] if isinstance(node, ast.Attribute)
                         else [node.arg] if isinstance(node, ast.keyword) and node.arg else [])
                if any("held" in n.lower() for n in names) and fn.name != "main":
                    raise AssertionError(f"train_needle.py: {fn.name} touches the held-out family")
    for name in ("RowMaker", "tokenizer_corpus", "make_loader"):
        body = next(ast.get_source_segment(src, n) for n in ast.walk(tree)
                    if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
        assert "held" not in body.lower() and "eval_families" not in body, name


def self_check(st, held):
    import suite_oracle as O
    both = O.needle_patterns(st) + O.needle_patterns(held)
    hay_train = check_family(st, both)
    hay_held = check_family(held, both)
    assert hay_train == set(st.hay_kinds) and hay_held == set(held.hay_kinds), (hay_train, hay_held)
    check_separation(st, held)
    check_procedural_documents(st)
    rep_gen = Generator(st, repeat=0.3)
    for kind in KINDS:
        it = rep_gen.make(kind, 3, 1500)
        assert score(kind, it["expected"], it["reference"], it["reference"]) == 1.0
        assert O.solve(st, kind, user_message(st, it)) == it["expected"], kind  # repeats never copy a needle
    assert score("niah_single", ["1234567"], " 1234567.") == 1.0
    assert score("niah_single", ["1234567"], "icy-meadow: 1234567", "icy-meadow: 1234567") == 1.0
    assert score("niah_single", ["1234567"], "icy-otter: 1234567", "icy-meadow: 1234567") == 0.0
    assert score("niah_multivalue", ["1", "2", "3", "4"], "1, 2") == 0.5
    assert score("summary", ["a b.", "c d."], "c d.\na b.") == 0.5
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", default=DEFAULT_TEXT)
    ap.add_argument("--held-out", action="store_true",
                    help="build every task from the held-out family (suite-heldout.json next to --text)")
    ap.add_argument("--self-check", action="store_true", help="check both families and their separation")
    ap.add_argument("--sample", help="write a JSONL of one item per kind (rough token counts) to this path")
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--demo", help="write demo documents (Spark job input: doc_id, task, text|documents, question, "
                                   "reference) of about --tokens tokens to this path")
    args = ap.parse_args()
    st = SuiteText(args.text, held_out=held_out_path(args.text) if args.held_out else None)
    if args.self_check:
        self_check(SuiteText(args.text), SuiteText(args.text, held_out=held_out_path(args.text)))
        print("suite self-check ok (training and held-out families, separation)")
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
