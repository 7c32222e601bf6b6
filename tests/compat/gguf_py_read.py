#!/usr/bin/env python3
"""Reads each GGUF with llama.cpp's own gguf-py (GGUFReader) and checks it
against what `ggtrain inspect --json` says of the same file: the same keys
(and values, for scalars and strings), the same tensors with their types,
shapes and offsets, every tensor's data readable. Exit 1 naming the first
difference.

  GGUF_PY=llama-src/gguf-py python3 gguf_py_read.py GGTRAIN FILE...
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.environ["GGUF_PY"])
from gguf import GGUFReader, GGUFValueType  # noqa: E402


def fail(msg):
    print(f"gguf_py_read: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def scalar(field):
    t = field.types[0]
    if t == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]


def check(ggtrain, path, ggtrain_reads=None):
    """ggtrain_reads: the file whose `inspect --json` to compare with (a control: another file)."""
    ours = json.loads(subprocess.run([ggtrain, "inspect", "--json", ggtrain_reads or path], check=True,
                                     capture_output=True).stdout)
    r = GGUFReader(path)
    keys = [k for k in r.fields if not k.startswith("GGUF.")]
    if sorted(keys) != sorted(ours["metadata"].keys()):
        fail(f"{path}: keys differ:\n  gguf-py: {keys}\n  ggtrain: {list(ours['metadata'].keys())}")
    for k in keys:
        f = r.fields[k]
        if f.types[0] in (GGUFValueType.ARRAY,):
            continue
        theirs, mine = scalar(f), ours["metadata"][k]
        if isinstance(mine, dict):
            mine = mine.get("value", mine)
        if isinstance(theirs, float) or isinstance(mine, float):
            # f32 keys: ggtrain prints them to JSON in its own digits; written
            # as "not within" so that a NaN on either side fails too
            if not abs(float(theirs) - float(mine)) <= 1e-6 * max(1.0, abs(float(theirs))):
                fail(f"{path}: {k} is {theirs} to gguf-py, {mine} to ggtrain")
        elif theirs != mine:
            fail(f"{path}: {k} is {theirs!r} to gguf-py, {mine!r} to ggtrain")
    if len(r.tensors) != len(ours["tensors"]):
        fail(f"{path}: {len(r.tensors)} tensors to gguf-py, {len(ours['tensors'])} to ggtrain")
    for t, o in zip(r.tensors, ours["tensors"]):
        shape = [int(x) for x in t.shape]
        if t.name != o["name"] or t.tensor_type.name != o["type"] or shape != o["shape"]:
            fail(f"{path}: tensor {t.name} {t.tensor_type.name} {shape} to gguf-py, "
                 f"{o['name']} {o['type']} {o['shape']} to ggtrain")
        if int(t.data_offset) - int(r.data_offset) != o["offset"]:
            fail(f"{path}: tensor {t.name} at {int(t.data_offset) - int(r.data_offset)} to gguf-py, {o['offset']} to ggtrain")
        _ = t.data.sum() if t.data.size else 0  # every byte readable
    return len(keys), len(r.tensors)


if __name__ == "__main__":
    if sys.argv[2] == "--control":  # GGTRAIN --control A B: A to gguf-py against B to ggtrain must fail
        fail = lambda msg: sys.exit(f"control: {msg}")  # noqa: E731
        try:
            check(sys.argv[1], sys.argv[3], sys.argv[4])
        except SystemExit as e:
            print(f"{e.code}: the comparison sees another file")
            sys.exit(0)
        print("control: two different files compared equal", file=sys.stderr)
        sys.exit(1)
    for p in sys.argv[2:]:
        n_keys, n_tensors = check(sys.argv[1], p)
        print(f"{os.path.basename(p)}: gguf-py reads {n_keys} keys and {n_tensors} tensors as ggtrain does")
