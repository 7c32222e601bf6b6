#!/usr/bin/env python3
"""Writes a small LFM2 model with llama.cpp's own gguf-py, laid out as its
convert_hf_to_gguf.py (conversion/lfm2.py) writes one, not by ggtrain:
head_count_kv a per-layer list with 0 on the convolution layers,
shortconv.l_cache, the final norm as token_embd_norm, the convolution
kernels squeezed to [C, taps], a tied head; random weights; and a real
byte-level BPE vocabulary read from a tokenizer.json (tokens, merges, added
tokens typed as the converter types them), its pre-tokenizer named "lfm2".

  GGUF_PY=llama-src/gguf-py python3 make_lfm2_gguf.py TOKENIZER.json OUT.gguf
"""
import os
import sys

sys.path.insert(0, os.environ["GGUF_PY"])
import gguf  # noqa: E402
from hf_vocabulary import add_bpe_tokenizer, random_tensors, vocabulary  # noqa: E402  (beside this script)

# Away from llama.cpp's and ggtrain's defaults, so a key one side dropped shows.
D_MODEL, N_HEADS, N_KV_HEADS, D_FF, CTX, TAPS = 64, 4, 2, 160, 256, 3
LAYER_TYPES = ["conv", "full_attention", "conv", "conv", "full_attention"]
ROPE_BASE, EPS = 300000.0, 3e-6


def main():
    tok_path, out = sys.argv[1], sys.argv[2]
    tokens, types, merges, ids = vocabulary(tok_path)
    _, rand, norm = random_tensors(7)
    w = gguf.GGUFWriter(out, "lfm2")
    w.add_name("lfm2-gguf-py")
    w.add_context_length(CTX)
    w.add_embedding_length(D_MODEL)
    w.add_block_count(len(LAYER_TYPES))
    w.add_head_count(N_HEADS)
    w.add_head_count_kv([N_KV_HEADS if t != "conv" else 0 for t in LAYER_TYPES])
    w.add_rope_freq_base(ROPE_BASE)
    w.add_vocab_size(len(tokens))
    w.add_shortconv_l_cache(TAPS)
    w.add_layer_norm_rms_eps(EPS)
    w.add_feed_forward_length(D_FF)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_bpe_tokenizer(w, tokens, types, merges, "lfm2", ids["<|begin_of_text|>"], ids["<|eot_id|>"], True)

    d_head = D_MODEL // N_HEADS
    w.add_tensor("token_embd.weight", rand(len(tokens), D_MODEL, scale=0.5))
    for i, kind in enumerate(LAYER_TYPES):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(D_MODEL))
        if kind == "conv":
            w.add_tensor(p + "shortconv.conv.weight", rand(D_MODEL, TAPS, scale=0.4))
            w.add_tensor(p + "shortconv.in_proj.weight", rand(3 * D_MODEL, D_MODEL))
            w.add_tensor(p + "shortconv.out_proj.weight", rand(D_MODEL, D_MODEL))
        else:
            w.add_tensor(p + "attn_q.weight", rand(N_HEADS * d_head, D_MODEL))
            w.add_tensor(p + "attn_k.weight", rand(N_KV_HEADS * d_head, D_MODEL))
            w.add_tensor(p + "attn_v.weight", rand(N_KV_HEADS * d_head, D_MODEL))
            w.add_tensor(p + "attn_output.weight", rand(D_MODEL, N_HEADS * d_head))
            w.add_tensor(p + "attn_q_norm.weight", norm(d_head))
            w.add_tensor(p + "attn_k_norm.weight", norm(d_head))
        w.add_tensor(p + "ffn_norm.weight", norm(D_MODEL))
        w.add_tensor(p + "ffn_gate.weight", rand(D_FF, D_MODEL))
        w.add_tensor(p + "ffn_up.weight", rand(D_FF, D_MODEL))
        w.add_tensor(p + "ffn_down.weight", rand(D_MODEL, D_FF))
    w.add_tensor("token_embd_norm.weight", norm(D_MODEL))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
