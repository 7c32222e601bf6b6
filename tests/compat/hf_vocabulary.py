"""A byte-level BPE vocabulary read from a Hugging Face tokenizer.json as
llama.cpp's converter reads one: the tokens by id (ids no entry names become
UNUSED pads), merges, and added tokens typed CONTROL when special, else
USER_DEFINED. Shared by the make_*_gguf.py scripts beside it, which import it
after putting GGUF_PY on sys.path.
"""
import json
import sys

import gguf


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
