#!/usr/bin/env python3
"""Writes one small GGUF per class of file that 2026's advisories against
llama.cpp's and ollama's GGUF readers describe, into fuzz/regressions/:
each must be refused by ggtrain's reader (gguf_reader/) or tokenizer
(tokenizer/) with a clean error, cheaply. fuzz/run.sh replays them (no
crash, no leak, no huge allocation); tests/gguf/test_gguf_advisories.cpp
checks that each is refused and what the message names. Standard library
only; the bytes are laid out by hand, as a crafted file would be.

  python3 fuzz/make_advisory_regressions.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
U8, U32, F32, STRING, ARRAY, U64 = 0, 4, 6, 8, 9, 10


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return s(key) + struct.pack("<I", vtype) + payload


def header(n_tensors, n_kv):
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)


def tensor_info(name, ne, ggml_type, offset):
    return s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne) + \
        struct.pack("<IQ", ggml_type, offset)


def arch():
    return kv("general.architecture", STRING, s("llama"))


def pad(b, to=32):
    return b + b"\0" * (-len(b) % to)


FILES = {
    # GHSA-96jg-mvhq-q7q7: a crafted general.alignment overflowing the
    # padding macro into an out-of-bounds read.
    "gguf_reader/refuse-alignment-2gib.gguf":
        header(1, 2) + arch() + kv("general.alignment", U32, struct.pack("<I", 1 << 31)) +
        tensor_info("t", [8], 0, 0) + b"\0" * 64,
    # CVE-2026-27940: an integer overflow in gguf_init's counts (past the
    # fix for CVE-2025-53630): a metadata count whose allocation wraps.
    "gguf_reader/refuse-kv-count-wraps.gguf":
        header(0, (1 << 64) // 24 + 1) + arch(),
    # The same for the tensor count.
    "gguf_reader/refuse-tensor-count-wraps.gguf":
        header((1 << 64) // 32 + 1, 1) + arch(),
    # ggml PR #1516: a ~160-byte file whose string length forces a GiB
    # allocation.
    "gguf_reader/refuse-string-length-gib.gguf":
        header(0, 2) + arch() + kv("general.name", STRING, struct.pack("<Q", 1 << 30) + b"x" * 64),
    # ... and an array whose length does the same.
    "gguf_reader/refuse-array-length-gib.gguf":
        header(0, 2) + arch() + kv("tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", F32, 1 << 30) + b"\0" * 64),
    # ollama CVE-2026-7482 ("Bleeding Llama"): a tensor whose dimensions lie
    # about its size, so its data would run past the end of the file.
    "gguf_reader/refuse-tensor-dims-lie.gguf":
        pad(header(1, 1) + arch() + tensor_info("token_embd.weight", [4096, 4096], 0, 0)) + b"\0" * 64,
    # ... or whose element count overflows.
    "gguf_reader/refuse-tensor-dims-overflow.gguf":
        pad(header(1, 1) + arch() + tensor_info("t", [1 << 32, 1 << 32, 1 << 4], 0, 0)) + b"\0" * 64,
    # llama.cpp PR #26690: tokenizer arrays read with an unchecked element
    # type: tokens as u32 and scores as strings.
    "tokenizer/refuse-tokens-not-strings.gguf":
        header(0, 4) + arch() + kv("tokenizer.ggml.model", STRING, s("llama")) +
        kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", U32, 3) + struct.pack("<III", 1, 2, 3)) +
        kv("tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", F32, 3) + struct.pack("<fff", 0, 0, 0)),
    "tokenizer/refuse-scores-not-floats.gguf":
        header(0, 4) + arch() + kv("tokenizer.ggml.model", STRING, s("llama")) +
        kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, 3) + s("<unk>") + s("a") + s("b")) +
        kv("tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", STRING, 3) + s("0") + s("0") + s("0")),
}

for rel, data in FILES.items():
    path = os.path.join(HERE, "regressions", rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    print(f"{rel}: {len(data)} bytes")
