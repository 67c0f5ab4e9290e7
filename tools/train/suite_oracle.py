"""Reads a suite document without the generator: regular expressions built from a family's
templates find the needles and the question, and solve() returns the answer items. Used by
suite.py's self-check (documents solvable, haystacks free of needle look-alikes, families kept
apart); the Java twin is gpu-engine's SuiteOracle test helper."""

import re

from suite import SLOT, oracle_templates

VALUE = r"\d{7}"
VAR = r"[A-Z]{5}"


def _words(st, name):
    base = name[:-1] if name not in st.words and name.endswith("2") else name
    return "(?:" + "|".join(re.escape(w) for w in sorted(st.words[base], key=len, reverse=True)) + ")"


def slot_pattern(st, s):
    """A non-capturing pattern for what a slot can hold."""
    if s in ("key", "key_b"):
        return _words(st, "keyadj") + "-" + _words(st, "keynoun")
    if s == "value":
        return VALUE
    if s in ("var", "prev"):
        return VAR
    if s == "title":
        return template_regex(st, st.needles["title"])
    if s == "fact":
        return template_regex(st, st.needles["fact"])
    if s in st.words or (s.endswith("2") and s[:-1] in st.words):
        return _words(st, s)
    if s == "min":
        return r"\d\d"
    return r"\d+"


def template_regex(st, template, capture=(), overrides=None):
    """The regex for one template; slots named in capture become groups, in template order."""
    overrides = overrides or {}
    out, pos = [], 0
    for m in SLOT.finditer(template):
        out.append(re.escape(template[pos:m.start()]))
        p = overrides.get(m.group(1)) or slot_pattern(st, m.group(1))
        out.append(f"({p})" if m.group(1) in capture else f"(?:{p})")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return "".join(out)


def _matches(st, templates, slots, text, overrides=None):
    """[(start, {slot: text})] for every match of any template, one per position of the first slot
    in `slots` (a template that is a substring of another finds the same needle twice)."""
    found = {}
    for t in templates:
        names = [m.group(1) for m in SLOT.finditer(t) if m.group(1) in slots]
        for m in re.finditer(template_regex(st, t, slots, overrides), text):
            got = dict(zip(names, m.groups()))
            span = m.start(1 + names.index(slots[0]))
            found.setdefault(span, got)
    return [found[k] for k in sorted(found)]


def needle_patterns(st):
    """Every needle template of the family as a regex (for look-alike checks)."""
    ts = list(st.needles["kv"]) + [p[k] for p in st.needles["vt"] for k in ("first", "next")] + list(st.needles["summary"])
    return [re.compile(template_regex(st, t)) for t in ts]


def question_patterns(st):
    return [re.compile(template_regex(st, t)) for qs in st.questions.values() for t in qs]


def _question(st, kind, msg, slots, extra=None):
    q = msg[msg.rindex("Question: ") + len("Question: "):]
    for t in st.questions[kind] + (extra or {}).get("questions", {}).get(kind, []):
        names = [m.group(1) for m in SLOT.finditer(t) if m.group(1) in slots]
        m = re.search(template_regex(st, t, slots), q)
        if m:
            return dict(zip(names, m.groups()))
    raise AssertionError(f"no {kind} question in {q!r}")


def solve(st, kind, msg, procedural=False):
    """The answer items a document asks for, read from its user message alone. procedural: the
    document may hold composed needles and questions (suite.Generator(procedural=p > 0))."""
    extra = oracle_templates() if procedural else {}
    kv = st.needles["kv"] + extra.get("kv", [])
    vt = st.needles["vt"] + extra.get("vt", [])
    markers = st.needles["summary"] + extra.get("summary", [])
    if kind in ("niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery"):
        body = msg[:msg.rindex("Question: ")]
        pairs = _matches(st, kv, ("value", "key"), body)
        qkind = {"niah_single": "single", "niah_multikey": "single"}.get(kind, kind[5:])
        q = _question(st, qkind, msg, ("key", "key_b"), extra)
        if kind == "niah_multivalue":
            return [p["value"] for p in pairs if p["key"] == q["key"]]
        keys = [q["key"]] + ([q["key_b"]] if kind == "niah_multiquery" else [])
        return [next(p["value"] for p in pairs if p["key"] == k) for k in keys]
    if kind == "vt":
        value = _question(st, "vt", msg, ("value",), extra)["value"]
        firsts = _matches(st, [p["first"] for p in vt], ("var", "value"), msg)
        nexts = _matches(st, [p["next"] for p in vt], ("var", "prev"), msg)
        chain = [f["var"] for f in firsts if f["value"] == value]
        grew = True
        while grew:
            grew = False
            for n in nexts:
                if n["prev"] == chain[-1] and n["var"] not in chain:
                    chain.append(n["var"])
                    grew = True
        return chain
    if kind == "mdqa":
        title = _question(st, "mdqa", msg, ("title",), extra)["title"]
        body = msg[:msg.rindex("Question: ")]
        pairs = _matches(st, kv, ("value", "key"), body, {"key": slot_pattern(st, "title")})
        return [next(p["value"] for p in pairs if p["key"] == title)]
    if kind == "summary":
        return [f["fact"] for f in _matches(st, markers, ("fact",), msg)]
    raise ValueError(kind)
