"""A byte-level BPE vocabulary read from a Hugging Face tokenizer.json as
llama.cpp's converter reads one: the tokens by id (ids no entry names become
UNUSED pads), merges, and added tokens typed CONTROL when special, else
USER_DEFINED; its tokenizer keys as the converter writes them; and the
random tensors the models get. Shared by the make_*_gguf.py scripts beside
it, which import it after putting GGUF_PY on sys.path.
"""
import json
import sys

import gguf
import numpy as np


def vocabulary(path):
    t = json.load(open(path, encoding="utf-8"))
    model = t["model"]
    if model["type"] != "BPE":
        sys.exit(f"{path}: model type {model['type']}, expected BPE")
    n = max(max(model["vocab"].values()), max(a["id"] for a in t["added_tokens"])) + 1
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.UNUSED] * n
    for piece, i in model["vocab"].items():
        tokens[i], types[i] = piece, gguf.TokenType.NORMAL
    for a in t["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    ids = {a["content"]: a["id"] for a in t["added_tokens"]}
    return tokens, types, merges, ids


def add_bpe_tokenizer(w, tokens, types, merges, pre, bos, eos, add_bos):
    """The tokenizer.ggml.* keys of a "gpt2" (byte-level BPE) vocabulary."""
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(add_bos)


def random_tensors(seed):
    """rand(*shape, scale): normal weights; norm(n): norm weights near 1."""
    rng = np.random.default_rng(seed)

    def rand(*shape, scale=0.08):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def norm(n):
        return (1.0 + rng.standard_normal(n) * 0.05).astype(np.float32)

    return rng, rand, norm
