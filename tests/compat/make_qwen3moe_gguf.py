#!/usr/bin/env python3
"""Writes a small Qwen3-MoE model with llama.cpp's own gguf-py, laid out as its
convert_hf_to_gguf.py (conversion/qwen.py, Qwen3MoeModel) writes one, not by
ggtrain: expert_count, expert_used_count, expert_feed_forward_length (the
dense feed_forward_length beside it, unused), key_length/value_length;
per layer the router ffn_gate_inp and the experts stacked into
ffn_down_exps, ffn_gate_exps, ffn_up_exps (in the converter's order), the
head norms; an untied head; random weights; and a real byte-level BPE
vocabulary read from a tokenizer.json under the pre-tokenizer name "qwen2".

  GGUF_PY=llama-src/gguf-py python3 make_qwen3moe_gguf.py TOKENIZER.json OUT.gguf
"""
import os
import sys

sys.path.insert(0, os.environ["GGUF_PY"])
import gguf  # noqa: E402
from hf_vocabulary import add_bpe_tokenizer, random_tensors, vocabulary  # noqa: E402  (beside this script)

# Away from llama.cpp's and ggtrain's defaults, so a key one side dropped
# shows: 8 experts of 48 (the dense width 160 unused), 3 a token, heads of 32
# where d_model / n_heads is 16.
D_MODEL, N_LAYERS, N_HEADS, N_KV_HEADS, HEAD, D_FF, CTX = 64, 3, 4, 2, 32, 160, 256
N_EXPERTS, N_USED, D_FF_EXPERT = 8, 3, 48
ROPE_BASE, EPS = 300000.0, 3e-6


def main():
    tok_path, out = sys.argv[1], sys.argv[2]
    tokens, types, merges, ids = vocabulary(tok_path)
    _, rand, norm = random_tensors(13)
    w = gguf.GGUFWriter(out, "qwen3moe")
    w.add_name("qwen3moe-gguf-py")
    w.add_context_length(CTX)
    w.add_embedding_length(D_MODEL)
    w.add_feed_forward_length(D_FF)
    w.add_block_count(N_LAYERS)
    w.add_head_count(N_HEADS)
    w.add_head_count_kv(N_KV_HEADS)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_layer_norm_rms_eps(EPS)
    w.add_expert_count(N_EXPERTS)
    w.add_expert_used_count(N_USED)
    w.add_key_length(HEAD)
    w.add_value_length(HEAD)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_expert_feed_forward_length(D_FF_EXPERT)
    w.add_vocab_size(len(tokens))
    add_bpe_tokenizer(w, tokens, types, merges, "qwen2", ids["<|endoftext|>"], ids["<|im_end|>"], False)

    w.add_tensor("token_embd.weight", rand(len(tokens), D_MODEL, scale=0.5))
    for i in range(N_LAYERS):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(D_MODEL))
        w.add_tensor(p + "attn_q.weight", rand(N_HEADS * HEAD, D_MODEL))
        w.add_tensor(p + "attn_k.weight", rand(N_KV_HEADS * HEAD, D_MODEL))
        w.add_tensor(p + "attn_v.weight", rand(N_KV_HEADS * HEAD, D_MODEL))
        w.add_tensor(p + "attn_output.weight", rand(D_MODEL, N_HEADS * HEAD))
        w.add_tensor(p + "attn_q_norm.weight", norm(HEAD))
        w.add_tensor(p + "attn_k_norm.weight", norm(HEAD))
        w.add_tensor(p + "ffn_norm.weight", norm(D_MODEL))
        # a router that separates the experts (its logits of order 1)
        w.add_tensor(p + "ffn_gate_inp.weight", rand(N_EXPERTS, D_MODEL, scale=0.3))
        w.add_tensor(p + "ffn_down_exps.weight", rand(N_EXPERTS, D_MODEL, D_FF_EXPERT, scale=0.2))
        w.add_tensor(p + "ffn_gate_exps.weight", rand(N_EXPERTS, D_FF_EXPERT, D_MODEL, scale=0.2))
        w.add_tensor(p + "ffn_up_exps.weight", rand(N_EXPERTS, D_FF_EXPERT, D_MODEL, scale=0.2))
    w.add_tensor("output_norm.weight", norm(D_MODEL))
    w.add_tensor("output.weight", rand(len(tokens), D_MODEL, scale=0.2))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
