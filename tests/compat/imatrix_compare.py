#!/usr/bin/env python3
"""Compares two importance matrices in llama-imatrix's GGUF format, read with
llama.cpp's own gguf-py: the same entries (NAME.in_sum2 and NAME.counts), the
same counts exactly, the same chunk keys, and every sum within LIMIT relative
to the larger of its two values (a NaN or Inf anywhere fails). Prints the
entry count and the largest relative difference.

  GGUF_PY=llama-src/gguf-py python3 imatrix_compare.py OURS.gguf THEIRS.gguf LIMIT
"""
import math
import os
import sys

sys.path.insert(0, os.environ["GGUF_PY"])
from gguf import GGUFReader  # noqa: E402


def fail(msg):
    print(f"imatrix_compare: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def read(path):
    r = GGUFReader(path)
    keys = {}
    for name in ("imatrix.chunk_count", "imatrix.chunk_size"):
        f = r.fields.get(name)
        if f is None:
            fail(f"{path}: no {name}")
        keys[name] = int(f.parts[f.data[0]][0])
    tensors = {t.name: [float(v) for v in t.data.reshape(-1)] for t in r.tensors}
    return keys, tensors


def main():
    ours_path, theirs_path, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
    ours_keys, ours = read(ours_path)
    theirs_keys, theirs = read(theirs_path)
    if ours_keys != theirs_keys:
        fail(f"chunk keys differ: {ours_keys} against {theirs_keys}")
    if sorted(ours) != sorted(theirs):
        only_ours = sorted(set(ours) - set(theirs))[:5]
        only_theirs = sorted(set(theirs) - set(ours))[:5]
        fail(f"tensors differ: only ours {only_ours}, only theirs {only_theirs}")
    worst, where = 0.0, ""
    for name, values in theirs.items():
        mine = ours[name]
        if len(mine) != len(values):
            fail(f"{name}: {len(mine)} values against {len(values)}")
        if name.endswith(".counts"):
            if mine != values:
                fail(f"{name}: counts {mine[:8]} against {values[:8]}")
            continue
        for i, (a, b) in enumerate(zip(mine, values)):
            if not (math.isfinite(a) and math.isfinite(b)):
                fail(f"{name}[{i}]: {a} against {b}")
            rel = abs(a - b) / max(abs(a), abs(b), 1e-30)
            if rel > worst:
                worst, where = rel, f"{name}[{i}] {a} against {b}"
    print(f"{len(theirs) // 2} entries, counts identical, sums within {worst:.2e} ({where})")
    if worst > limit:
        fail(f"the largest relative difference {worst:.2e} is over {limit:.0e}")


main()
