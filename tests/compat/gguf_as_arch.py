#!/usr/bin/env python3
"""Rewrites an F32 GGUF as another architecture with llama.cpp's own gguf-py:
general.architecture set to ARCH, every "<old arch>." key renamed to
"ARCH.", and the tensors whose names contain one of --drop left out;
--drop-key leaves keys out, --set-u32 KEY=N sets integer ones, and
--reverse-rows reverses each row (ne[0]) of the tensors whose names contain
one of its entries (a convolution kernel read backwards). A test's
control: the same weights as a model of another family, or with a key that
ggtrain could have written wrongly or left out.

  GGUF_PY=llama-src/gguf-py python3 gguf_as_arch.py IN.gguf OUT.gguf ARCH [--drop attn_q_norm ...]
      [--drop-key gemma3.rope.freq_base_swa ...] [--set-u32 gemma3.attention.sliding_window=15 ...]

rewrite_gguf() is the copy itself, which make_llama3_gguf.py uses too.
"""
import argparse
import os
import sys

sys.path.insert(0, os.environ["GGUF_PY"])
import numpy as np  # noqa: E402
from gguf import GGUFReader, GGUFValueType, GGUFWriter  # noqa: E402


def rewrite_gguf(src, dst, arch=None, set_f32=None, drop=(), first_tensors=None, set_u32=None, drop_keys=(),
                 reverse_rows=()):
    """Copies src to dst with gguf-py: the architecture renamed to `arch`
    (keys too), the f32 keys of `set_f32` and the u32 keys of `set_u32`
    ({name: value}, after renaming) set, the keys in `drop_keys` left out,
    tensors whose names contain a `drop` entry or appear in `first_tensors`
    ({name: array}, written first instead) left out."""
    set_f32 = set_f32 or {}
    set_u32 = set_u32 or {}
    first_tensors = first_tensors or {}
    r = GGUFReader(src)
    old = r.fields["general.architecture"].contents()
    arch = arch or old
    w = GGUFWriter(dst, arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name.startswith(old + "."):
            name = arch + name[len(old):]
        if name in drop_keys:
            continue
        if name in set_f32:
            w.add_key_value(name, set_f32[name], GGUFValueType.FLOAT32)
            continue
        if name in set_u32:
            w.add_key_value(name, set_u32.pop(name), GGUFValueType.UINT32)
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        w.add_key_value(name, field.contents(), vtype, sub_type=sub)
    for name, value in set_u32.items():  # keys src lacks
        w.add_key_value(name, value, GGUFValueType.UINT32)
    for name, data in first_tensors.items():
        w.add_tensor(name, data)
    for t in r.tensors:
        if t.name in first_tensors or any(d in t.name for d in drop):
            continue
        if t.tensor_type.name != "F32":
            sys.exit(f"{dst}: tensor {t.name} of {src} is {t.tensor_type.name}; give an F32 file")
        data = np.array(t.data, dtype=np.float32).reshape(list(reversed(t.shape.tolist())))
        if any(r in t.name for r in reverse_rows):
            data = np.ascontiguousarray(data[..., ::-1])
        w.add_tensor(t.name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("arch")
    ap.add_argument("--drop", nargs="*", default=[])
    ap.add_argument("--drop-key", nargs="*", default=[])
    ap.add_argument("--set-u32", nargs="*", default=[])
    ap.add_argument("--reverse-rows", nargs="*", default=[])
    a = ap.parse_args()
    set_u32 = {k: int(v) for k, v in (kv.split("=", 1) for kv in a.set_u32)}
    rewrite_gguf(a.src, a.dst, arch=a.arch, drop=a.drop, set_u32=set_u32, drop_keys=a.drop_key,
                 reverse_rows=a.reverse_rows)


if __name__ == "__main__":
    main()
