#!/usr/bin/env python3
"""Writes a small Qwen3.5-MoE model with llama.cpp's own gguf-py: the Qwen3.5
file of make_qwen35_gguf.py (Gated DeltaNet and gated attention layers, the
multi-token-prediction block as blk.5) with Qwen3.5-MoE's feed-forward in
every block, the prediction block's included: a router ffn_gate_inp over 6
experts of 40 stacked into ffn_gate_exps/ffn_up_exps/ffn_down_exps, 2 a
token, beside a shared expert of 56 (ffn_*_shexp) gated by
ffn_gate_inp_shexp; expert_feed_forward_length and
expert_shared_feed_forward_length away from the dense width (160, unused).

  GGUF_PY=llama-src/gguf-py python3 make_qwen35moe_gguf.py TOKENIZER.json OUT.gguf
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_qwen35_gguf import write  # noqa: E402

if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2], experts=(6, 2, 40, 56))
