#!/usr/bin/env python3
"""Rewrites an F32 llama GGUF as a Llama 3.x file, with llama.cpp's own
gguf-py (not ggtrain's writer): every key and tensor copied, then
llama.rope.freq_base, llama.attention.layer_norm_rms_epsilon and, unless
--no-rope-freqs, the tensor rope_freqs.weight that convert_hf_to_gguf.py
computes from a "llama3" rope_scaling (Transformer.generate_extra_tensors,
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
from gguf import GGUFReader  # noqa: E402
from gguf_as_arch import rewrite_gguf  # noqa: E402  (beside this script)


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

    fields = GGUFReader(a.src).fields
    arch = fields["general.architecture"].contents()
    if arch != "llama":
        sys.exit(f"make_llama3_gguf: {a.src} is '{arch}', not llama")
    d_head = int(fields["llama.rope.dimension_count"].contents())
    factors = {} if a.no_rope_freqs else {
        "rope_freqs.weight": llama3_rope_factors(d_head, a.freq_base, a.factor, a.low, a.high, a.original_ctx)}
    rewrite_gguf(a.src, a.dst,
                 set_f32={"llama.rope.freq_base": a.freq_base, "llama.attention.layer_norm_rms_epsilon": a.eps},
                 drop=("rope_freqs.weight",), first_tensors=factors)

if __name__ == "__main__":
    main()
