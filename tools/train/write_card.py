#!/usr/bin/env python3
"""Writes the model card (README.md) of a longsieve-needle export from its training_meta.json.

    python3 tools/train/write_card.py models/longsieve-needle-7m [--log run-log.txt]

Plain Python; run it wherever the exported folder is (the GPU host or here).
"""

import argparse
import json
import os

KIND_NAMES = {"niah_single": "single needle", "niah_multikey": "multi-key needle", "niah_multivalue": "multi-value needle",
              "niah_multiquery": "multi-query needle", "vt": "variable tracking", "mdqa": "multi-document QA",
              "summary": "extractive summary"}


def table(res):
    if not res:
        return "(not measured)"
    mults = sorted({int(k.split("@")[1].rstrip("x")) for k in res})
    lines = ["| task | " + " | ".join(f"{m}x" for m in mults) + " |", "|---" + "|---:" * len(mults) + "|"]
    for kind, name in KIND_NAMES.items():
        cells = []
        for m in mults:
            v = res.get(f"{kind}@{m}x")
            cells.append("" if v is None else f"{100 * v['accuracy']:.0f} (n={v['n']})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def procedural_line(m):
    """The composed-phrasing share of the recipe (runs before #19's fix have none)."""
    p, parts = m.get("procedural", 0.0), m.get("procedural_parts") or {}
    if not p:
        return ""
    cores = sum(parts.get("question_cores", {}).values()) or "?"
    hay = hay_line(m)
    return (f" With probability {p} a needle or question is composed instead (procedural share): a needle from "
            f"{parts.get('prefixes', '?')} prefixes x {parts.get('kv_connectors', '?')} key-value and "
            f"{parts.get('vk_connectors', '?')} value-key connectors x {parts.get('suffixes', '?')} suffixes, or in "
            f"{100 * parts.get('record_share', 0):.0f}% of them one of {parts.get('records', '?')} record lines; a question "
            f"from {parts.get('question_openers', '?')} openers x {cores} cores x {parts.get('question_closers', '?')} "
            f"closers; variable tracking and summaries draw from {parts.get('vt_styles', '?')} more assignment styles "
            f"and {parts.get('summary_markers', '?')} more fact markers.{hay} No composed phrasing "
            f"{'or haystack line ' if hay else ''}is a held-out one (`suite.py --self-check`).")


def hay_line(m):
    """The procedural-haystack part of the recipe (run 5 on; runs before it have none)."""
    h = (m.get("procedural_parts") or {}).get("haystacks")
    if not h:
        return ""
    kinds = ", ".join(m.get("procedural_haystack_kinds", {})) or f"{h.get('kinds', '?')} kinds"
    return (f" With the same probability, drawn apart, the haystack is procedural: one of {h.get('kinds', '?')} "
            f"training-only kinds ({kinds}; {h.get('templates', '?')} line templates) or, in "
            f"{100 * h.get('mixed_share', 0):.0f}% of them, segments of 2-4 kinds (old and new) switching every few "
            f"lines, with random indentation, blank lines, {h.get('separators', '?')} kinds of separator lines and "
            f"line-wrapping widths.")


def job_line(m):
    """How the run was split into processes (device calls of at most 10 minutes; train_loop.py)."""
    n = m.get("training_processes", 1)
    if n <= 1:
        return "the whole run (tokenizer, training, export, checks, eval) fit in one job"
    return (f"training ran in {n} processes, each resuming the previous one's checkpoint (same data, schedule and "
            f"optimizer state)")


def resumed_line(m):
    cmds = m.get("resume_commands") or []
    return "".join(f"\n- resumed with: `{c}`" for c in cmds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    args = ap.parse_args()
    with open(os.path.join(args.model_dir, "training_meta.json")) as f:
        m = json.load(f)
    mc, a = m["model"], m["args"]
    size = os.path.getsize(os.path.join(args.model_dir, "model.safetensors"))
    checks = m.get("checks", {})
    hay_kinds = ", ".join(m.get("haystack_kinds", {})) or "?"
    questions = sum(m.get("question_phrasings", {}).values()) or "?"
    procedural = procedural_line(m)
    card = f"""# {a['name']}

A small Llama-architecture model trained from scratch to find facts in long documents, for
LongSieve's quality suite (issue 6) and demo. Trained on generated RULER-style documents only; it
knows nothing else. Not a general language model.

## Architecture
LlamaForCausalLM: {mc['layers']} layers, hidden {mc['dim']}, SwiGLU intermediate {mc['hidden']},
{mc['heads']} query heads / {mc['kv_heads']} KV heads (GQA, {mc['heads'] // mc['kv_heads']} query heads per KV head),
head_dim {mc['head_dim']}, RoPE theta {mc['theta']:.0f}, RMSNorm eps {mc['eps']}, untied embeddings,
vocabulary {mc['vocab']} (byte-level BPE, Llama 3 split regex, trained with `tokenizers` on the
generated data). {m['params'] / 1e6:.2f}M parameters, bf16 safetensors ({size / 1e6:.1f} MB).
max_position_embeddings is {mc['max_positions']} so that the suite can run 2x-8x the training
length; the model was trained at {a['seq']} tokens only.

## Chat format
tokenizer_config.json's chat template renders one user turn as
`<s><|user|>\\n{{message}}\\n<|assistant|>\\n`; the answer ends with `<|end|>` (eos). The user
messages are the Spark job's prompts (spark-job `PromptBuilder`, the same strings as
`suite-text.json` "prompts").

## Data recipe
Generated on the fly by `tools/train/suite.py` from `gpu-engine/src/main/resources/io/longsieve/eval/suite-text.json`
(the Java suite reads the same file), the training family: haystack kinds {hay_kinds}
(sentence or line templates over word lists; prose and essays in paragraphs, lists, tables, logs and code one a line),
{m.get('needle_phrasings', '?')} key-value needle phrasings (sentences, value-before-key sentences, list items, table
rows, JSON-ish and XML-ish lines, assignments), {m.get('vt_phrasings', '?')} variable-assignment styles,
{m.get('summary_markers', '?')} summary markers and {questions} question phrasings, each drawn per document
(needle phrasings per needle), so every batch mixes them.{procedural} Values are uniform 7-digit numbers; the answer restates
the key as the question gives it and copies the value (`key: value`), one format for every phrasing. Training haystacks
repeat an earlier sentence with probability {m.get('repeat', 0.0)} so that the prompt loss rewards copying. Tasks (mix):
single needle 20%, multi-key 15%, multi-value 10%, multi-query 10%, variable tracking 15%,
multi-document QA 15%, extractive summary 15%; needles at uniformly random depths; prompt
lengths from 40% to 100% of the row length. Length curriculum: 256 -> 512 -> 1024 -> {a['seq']} tokens.
Loss: mean cross-entropy over the answer tokens (per document) + {a['ctx_weight']} x mean cross-entropy over the prompt.
The held-out family (`suite.py --held-out`: other needle and question phrasings, other haystack kinds) is never
trained on; the second table below is measured on it.

## Training
- seed {a['seed']}; {m['steps']} steps (planned {m['planned_steps']}) of {a['tokens_per_step']} tokens; AdamW
  (betas 0.9/0.95, weight decay 0.1), peak lr {a['lr']}, warm-up then cosine to 10%; bf16 autocast; grad clip 1.0
- training time {m['train_seconds']:.0f} s on one {m['device']} (torch {m['torch']}), of which {m['data_wait_seconds']:.0f} s
  waiting for data; {job_line(m)}
- final answer loss {m['final_answer_loss']:.4f} (EMA {m['final_answer_loss_ema']:.4f}), prompt loss {m['final_context_loss']:.4f}
- command: `{m['command']}`{resumed_line(m)}

## Checks
{chr(10).join(f'- {k}: {v}' for k, v in checks.items())}
- goldens.json: transformers (fp32, eager, CPU) logits at the last prompt position and 32 greedy
  tokens with margins for two suite prompts; `NeedleModelParityTest` holds the Java CPU engine to them.

## Dense accuracy on the training code (GPU, bf16, greedy), % of documents
Training family (phrasings and haystack kinds seen in training, new documents):

{table(m.get('dense_eval_gpu', {}))}

Held-out family (needle phrasings, questions and haystack kinds never trained on):

{table(m.get('dense_eval_gpu_heldout', {}))}
"""
    with open(os.path.join(args.model_dir, "README.md"), "w") as f:
        f.write(card)
    print(card)


if __name__ == "__main__":
    main()
