#!/usr/bin/env python3
"""The bundled demo model for examples/model/: a tiny RANDOM-WEIGHT Llama checkpoint.

Its outputs are meaningless; it exists so the Spark job and engine can be run end to end
(load config.json / safetensors / tokenizer.json / chat template, prefill, decode) without
downloading anything. Replace it with a trained model for real use.

  LlamaForCausalLM, hidden 128, 4 layers, 4 heads / 2 kv heads (head_dim 32), intermediate 344,
  vocab 2048 (byte-level BPE tokenizer, ~2000 learned tokens + 5 Llama 3 special tokens),
  max_position_embeddings 8192, rope_theta 500000, untied, weights stored as bfloat16,
  Llama 3 chat template, eos <|eot_id|>.

Run on a host with torch + transformers + tokenizers + safetensors:
    python3 tools/make_sample_model.py --out examples/model
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tinylm_common as C  # noqa: E402

CORPUS_SEED = 4321
WEIGHT_SEED = 20240
TOKENIZER_TRAINED_VOCAB = 2000
INIT_STD = 0.14                       # attention/MLP matrices (hidden 128: ~0.2 * sqrt(64/128))
EMB_STD = 0.1
MAX_BYTES = 5 * 1024 * 1024

README = """# LongSieve sample model (random weights)

**This model has random weights. Its outputs are meaningless text.** It is bundled so that the
LongSieve Spark job and the GPU engine can be run end to end on a laptop or a CI machine without
downloading a real checkpoint: it exercises the full loading path (config.json, safetensors in
bfloat16, tokenizer.json, tokenizer_config.json with a Llama 3 chat template) and the whole
prefill/decode pipeline. Use a real Llama 3 / Qwen2 checkpoint (or the project's trained model,
once it exists) for anything where the answers matter.

## How it was made

```
python3 tools/make_sample_model.py --out examples/model
```

(run on a host with PyTorch and transformers; in this repository via `tools/gpu_host/make_fixtures.sh`).
Seeds: corpus {corpus_seed}, weights {weight_seed} (`torch.Generator().manual_seed({weight_seed})`;
attention/MLP matrices ~ N(0, {std}), embed_tokens/lm_head ~ N(0, {emb_std}), RMSNorm weights
~ 1 + N(0, 0.1)). Library versions: {versions}.

## Architecture

| field | value |
| --- | --- |
| architecture | LlamaForCausalLM |
| hidden_size | 128 |
| num_hidden_layers | 4 |
| num_attention_heads / num_key_value_heads | 4 / 2 (GQA, head_dim 32) |
| intermediate_size | 344 |
| vocab_size | {vocab} (tokenizer has {n_tok} tokens) |
| max_position_embeddings | 8192 |
| rope_theta | 500000 (no scaling) |
| tie_word_embeddings | false |
| weights dtype | bfloat16 |
| parameters | {n_params} |

## Tokenizer

Llama 3 style byte-level BPE trained by the script on a generated English-like corpus
(templates and word lists, digits, punctuation, some non-ASCII): Split(Llama 3 regex) + ByteLevel
pre-tokenizer, ByteLevel decoder, `<|begin_of_text|>` added at the start of every encoding,
special tokens `<|begin_of_text|>`, `<|end_of_text|>`, `<|start_header_id|>`, `<|end_header_id|>`,
`<|eot_id|>`. eos_token is `<|eot_id|>`; config.json lists both end tokens in `eos_token_id`.

## Sanity output (transformers, fp32 compute from the bf16 weights, greedy, CPU)

Prompt `{prompt!r}` -> input_ids `{ids}`

Greedy 16 new tokens: `{gen_ids}` = `{gen_text!r}`

## Files

{files}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (becomes examples/model)")
    args = ap.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)

    corpus = C.make_corpus(CORPUS_SEED, n_paragraphs=12000)
    raw = C.train_bpe_tokenizer(corpus, TOKENIZER_TRAINED_VOCAB)
    hf, _ = C.save_hf_tokenizer(raw, out, C.EOT_ID, C.LLAMA3_CHAT_TEMPLATE)
    n_tok = len(hf)
    vocab = C.round_up(n_tok, 64)
    bos_id = hf.convert_tokens_to_ids(C.BOS)
    eos_ids = [hf.convert_tokens_to_ids(C.EOT_TEXT), hf.convert_tokens_to_ids(C.EOT_ID)]

    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=128, intermediate_size=344, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=8192,
        rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=INIT_STD,
        bos_token_id=bos_id, eos_token_id=eos_ids, hidden_act="silu",
        **C.rope_kwargs(LlamaConfig, 500000.0))
    torch.manual_seed(WEIGHT_SEED)
    model = LlamaForCausalLM(cfg)
    C.init_weights(model, seed=WEIGHT_SEED, std=INIT_STD, emb_std=EMB_STD)
    n_params = sum(p.numel() for p in model.parameters())
    model.to(torch.bfloat16).save_pretrained(out)

    m32 = C.load_fp32(LlamaForCausalLM, out)
    prompt = "Hello, world! Summarise the report from Zürich."
    ids = hf(prompt)["input_ids"]
    g = C.greedy(m32, ids, 16, eos_ids[0])
    files = C.file_sizes(out)
    files["README.md"] = 0
    total = sum(files.values())
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write(README.format(
            corpus_seed=CORPUS_SEED, weight_seed=WEIGHT_SEED, std=INIT_STD, emb_std=EMB_STD,
            versions=", ".join(f"{k} {v}" for k, v in C.library_versions().items()),
            vocab=vocab, n_tok=n_tok, n_params=n_params, prompt=prompt, ids=ids,
            gen_ids=g["ids"], gen_text=hf.decode(g["ids"], skip_special_tokens=False),
            files="\n".join(f"- `{k}`" + (f" ({v} bytes)" if k != "README.md" else "") for k, v in files.items())))
    total = sum(C.file_sizes(out).values())
    print(f"sample model: {n_params} params, vocab {vocab} (tokenizer {n_tok}), total {total} bytes")
    for k, v in C.file_sizes(out).items():
        print(f"  {k}: {v}")
    print(f"  greedy: {g['ids']} margins min {min(g['margins']):.4g}")
    assert total < MAX_BYTES, f"sample model is {total} bytes (limit {MAX_BYTES})"


if __name__ == "__main__":
    main()
