#!/usr/bin/env python3
"""Rewrites an F32 llama GGUF as a Llama 3.x file, with llama.cpp's own
gguf-py (not ggtrain's writer): every key and tensor copied, then
llama.rope.freq_base, llama.attention.layer_norm_rms_epsilon and, unless
--no-rope-freqs, the tensor rope_freqs.weight that convert_hf_to_gguf.py
computes from a "llama3" rope_scaling (LlamaModel.generate_extra_tensors,
re-derived below from that formula).

  GGUF_PY=llama-src/gguf-py python3 make_llama3_gguf.py IN.gguf OUT.gguf \
      [--freq-base B] [--eps E] [--factor F] [--low L] [--high H] \
      [--original-ctx N] [--no-rope-freqs]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.environ["GGUF_PY"])
import numpy as np  # noqa: E402
from gguf import GGUFReader, GGUFValueType, GGUFWriter  # noqa: E402


def llama3_rope_factors(d_head, base, factor, low, high, original_ctx):
    freqs = 1.0 / (base ** (np.arange(0, d_head, 2, dtype=np.float32) / d_head))
    low_wavelen, high_wavelen = original_ctx / low, original_ctx / high
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (original_ctx / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--freq-base", type=float, default=500000.0)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--factor", type=float, default=8.0)
    ap.add_argument("--low", type=float, default=1.0)
    ap.add_argument("--high", type=float, default=4.0)
    ap.add_argument("--original-ctx", type=float, default=16.0)
    ap.add_argument("--no-rope-freqs", action="store_true")
    a = ap.parse_args()

    r = GGUFReader(a.src)
    arch = r.fields["general.architecture"].contents()
    if arch != "llama":
        sys.exit(f"make_llama3_gguf: {a.src} is '{arch}', not llama")
    w = GGUFWriter(a.dst, arch)
    changed = {
        "llama.rope.freq_base": (a.freq_base, GGUFValueType.FLOAT32),
        "llama.attention.layer_norm_rms_epsilon": (a.eps, GGUFValueType.FLOAT32),
    }
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name in changed:
            value, vtype = changed[name]
            w.add_key_value(name, value, vtype)
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        w.add_key_value(name, field.contents(), vtype, sub_type=sub)

    d_head = int(r.fields["llama.rope.dimension_count"].contents())
    if not a.no_rope_freqs:
        w.add_tensor("rope_freqs.weight",
                     llama3_rope_factors(d_head, a.freq_base, a.factor, a.low, a.high, a.original_ctx))
    for t in r.tensors:
        if t.tensor_type.name != "F32":
            sys.exit(f"make_llama3_gguf: tensor {t.name} is {t.tensor_type.name}; give an F32 file")
        if t.name == "rope_freqs.weight":
            continue
        w.add_tensor(t.name, np.array(t.data, dtype=np.float32).reshape(list(reversed(t.shape.tolist()))))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
