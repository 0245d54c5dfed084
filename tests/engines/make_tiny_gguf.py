#!/usr/bin/env python3
"""Writes a tiny GGUF model for the llama.cpp engine's tests: a 2-layer llama with
random weights (seeded) and a real tokenizer, gpt-oss's o200k BPE from its
tokenizer.json, written with llama.cpp's own gguf-py (PYTHONPATH=.../gguf-py) and
numpy.

The directory gets model.gguf, and beside it the tokenizer.json and (when given)
tokenizer_config.json the node reads to tokenize prompts and render chat templates.

--break makes a model llama.cpp must refuse although its GGUF header is sound:
  wrong-shape     blk.1.ffn_down.weight transposed
  missing-tensor  no blk.1.ffn_down.weight
  unknown-arch    general.architecture "llmr-unknown"

Usage: make_tiny_gguf.py --tokenizer TOKENIZER_JSON --out DIR [--seed N]
                         [--tokenizer-config FILE] [--break KIND]
"""
import argparse
import json
import os
import shutil
import sys

try:
    import numpy as np
    import gguf
except ImportError as e:  # say what is missing and where it comes from
    sys.exit(f"make_tiny_gguf: {e}: needs numpy (Debian python3-numpy) and llama.cpp's "
             "gguf-py on PYTHONPATH (build/llama.cpp/src/gguf-py)")

N_EMBD, N_FF, N_LAYER, N_HEAD, N_HEAD_KV, N_CTX = 64, 128, 2, 4, 2, 2048


def vocabulary(tokenizer):
    """The token list (dense ids), each token's type and the merges, from a Hugging
    Face BPE tokenizer.json (byte-level, as gpt-oss's)."""
    model = tokenizer["model"]
    if model.get("type") != "BPE":
        sys.exit("make_tiny_gguf: the tokenizer must be BPE")
    by_id = {i: t for t, i in model["vocab"].items()}
    special = set()
    for a in tokenizer.get("added_tokens", []):
        by_id[a["id"]] = a["content"]
        if a.get("special"):
            special.add(a["id"])
    n = max(by_id) + 1
    tokens, types = [], []
    for i in range(n):
        if i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, types, merges, special


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--tokenizer-config")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--break", dest="breakage",
                    choices=["wrong-shape", "missing-tensor", "unknown-arch"])
    a = ap.parse_args()

    with open(a.tokenizer, encoding="utf-8") as f:
        tokenizer = json.load(f)
    tokens, types, merges, special = vocabulary(tokenizer)
    ids = {t: i for i, t in enumerate(tokens)}
    os.makedirs(a.out, exist_ok=True)

    arch = "llmr-unknown" if a.breakage == "unknown-arch" else "llama"
    w = gguf.GGUFWriter(os.path.join(a.out, "model.gguf"), arch)
    w.add_name("llmr tiny llama (random weights)")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_block_count(N_LAYER)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-4o")  # o200k's pre-tokenizer, as llama.cpp names it
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    for name, setter in (("<|startoftext|>", w.add_bos_token_id),
                         ("<|return|>", w.add_eos_token_id)):
        if name in ids:
            setter(ids[name])
    w.add_add_bos_token(False)

    rng = np.random.default_rng(a.seed)

    def mat(rows, cols, scale):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float16)

    vocab = len(tokens)
    # Embeddings large enough that the logits (tied output) spread: greedy then has a
    # clear winner at each step.
    w.add_tensor("token_embd.weight", mat(vocab, N_EMBD, 1.0))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    head_dim = N_EMBD // N_HEAD
    for b in range(N_LAYER):
        p = f"blk.{b}."
        w.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(p + "attn_q.weight", mat(N_EMBD, N_EMBD, 0.1))
        w.add_tensor(p + "attn_k.weight", mat(N_HEAD_KV * head_dim, N_EMBD, 0.1))
        w.add_tensor(p + "attn_v.weight", mat(N_HEAD_KV * head_dim, N_EMBD, 0.1))
        w.add_tensor(p + "attn_output.weight", mat(N_EMBD, N_EMBD, 0.1))
        w.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", mat(N_FF, N_EMBD, 0.1))
        w.add_tensor(p + "ffn_up.weight", mat(N_FF, N_EMBD, 0.1))
        last = b == N_LAYER - 1
        if not (last and a.breakage == "missing-tensor"):
            wrong = last and a.breakage == "wrong-shape"
            w.add_tensor(p + "ffn_down.weight",
                         mat(N_FF, N_EMBD, 0.1) if wrong else mat(N_EMBD, N_FF, 0.1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    shutil.copyfile(a.tokenizer, os.path.join(a.out, "tokenizer.json"))
    if a.tokenizer_config:
        shutil.copyfile(a.tokenizer_config, os.path.join(a.out, "tokenizer_config.json"))
    print(f"make_tiny_gguf: {a.out}/model.gguf: llama, {N_LAYER} layers, "
          f"{N_EMBD} wide, {vocab} tokens")


if __name__ == "__main__":
    main()
