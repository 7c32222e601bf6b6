#!/usr/bin/env python3
"""Rewrites an F32 GGUF as another architecture with llama.cpp's own gguf-py:
general.architecture set to ARCH, every "<old arch>." key renamed to
"ARCH.", and the tensors whose names contain one of --drop left out. A test's
control: the same weights as a model of another family.

  GGUF_PY=llama-src/gguf-py python3 gguf_as_arch.py IN.gguf OUT.gguf ARCH [--drop attn_q_norm ...]
"""
import argparse
import os
import sys

sys.path.insert(0, os.environ["GGUF_PY"])
import numpy as np  # noqa: E402
from gguf import GGUFReader, GGUFValueType, GGUFWriter  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("arch")
    ap.add_argument("--drop", nargs="*", default=[])
    a = ap.parse_args()
    r = GGUFReader(a.src)
    old = r.fields["general.architecture"].contents()
    w = GGUFWriter(a.dst, a.arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name.startswith(old + "."):
            name = a.arch + name[len(old):]
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        w.add_key_value(name, field.contents(), vtype, sub_type=sub)
    for t in r.tensors:
        if any(d in t.name for d in a.drop):
            continue
        if t.tensor_type.name != "F32":
            sys.exit(f"gguf_as_arch: tensor {t.name} is {t.tensor_type.name}; give an F32 file")
        w.add_tensor(t.name, np.array(t.data, dtype=np.float32).reshape(list(reversed(t.shape.tolist()))))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
