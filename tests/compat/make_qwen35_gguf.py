#!/usr/bin/env python3
"""Writes a small Qwen3.5 model with llama.cpp's own gguf-py, laid out as its
convert_hf_to_gguf.py (conversion/qwen.py, Qwen3_5TextModel) writes one, not
by ggtrain: the ssm.* sizes, attention.recurrent_layers from the model's
layer_types (and full_attention_interval beside it, as the converter writes
both), rope.dimension_count a quarter of the head, the rope sections
[11, 11, 10, 0], key_length/value_length; Gated DeltaNet layers with
attn_qkv, attn_gate, ssm_conv1d squeezed to [conv_dim, taps], ssm_dt.bias,
ssm_a (= -exp(A_log), no .weight), ssm_beta, ssm_alpha, ssm_norm, ssm_out;
gated attention layers whose attn_q yields [query | gate] per head; the
feed-forward norm post_attention_norm; an untied head; random weights; a
real byte-level BPE vocabulary read from a tokenizer.json under the
pre-tokenizer name "qwen35"; and, as the converter writes by default
(_QwenMtpMixin), the multi-token-prediction block: one more block in
block_count and in the recurrent-layer list (as an attention layer),
nextn_predict_layers = 1, and its tensors under blk.5 (a gated attention
block with nextn.eh_proj, nextn.enorm, nextn.hnorm and
nextn.shared_head_norm), which llama.cpp's model skips.

  GGUF_PY=llama-src/gguf-py python3 make_qwen35_gguf.py TOKENIZER.json OUT.gguf
"""
import os
import sys

sys.path.insert(0, os.environ["GGUF_PY"])
import numpy as np  # noqa: E402
import gguf  # noqa: E402
from hf_vocabulary import add_bpe_tokenizer, random_tensors, vocabulary  # noqa: E402  (beside this script)

# Away from llama.cpp's and ggtrain's defaults, so a key one side dropped shows:
# attention on layers 1 and 4 (not every fourth), 2 key heads shared by 4
# value heads of 16, 3 taps (Qwen3.5's are 4), heads of 32 rotating 8.
D_MODEL, N_HEADS, N_KV_HEADS, HEAD, N_ROT, D_FF, CTX = 64, 4, 2, 32, 8, 160, 256
LAYER_TYPES = ["linear_attention", "full_attention", "linear_attention", "linear_attention", "full_attention"]
K_HEADS, V_HEADS, STATE, TAPS = 2, 4, 16, 3
ROPE_BASE, EPS = 300000.0, 3e-6


def write(tok_path, out, experts=None):
    """experts: (count, used, width, shared width) for a qwen35moe file, whose
    feed-forward (the prediction block's too) is routed experts beside a
    gated shared expert, as Qwen3.5-MoE's."""
    arch = "qwen35moe" if experts else "qwen35"
    tokens, types, merges, ids = vocabulary(tok_path)
    rng, rand, norm = random_tensors(11)
    w = gguf.GGUFWriter(out, arch)
    w.add_name(arch + "-gguf-py")
    w.add_context_length(CTX)
    w.add_embedding_length(D_MODEL)
    w.add_block_count(len(LAYER_TYPES) + 1)
    w.add_nextn_predict_layers(1)
    w.add_feed_forward_length(D_FF)
    w.add_head_count(N_HEADS)
    w.add_head_count_kv(N_KV_HEADS)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_layer_norm_rms_eps(EPS)
    w.add_key_length(HEAD)
    w.add_value_length(HEAD)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_ssm_conv_kernel(TAPS)
    w.add_ssm_state_size(STATE)
    w.add_ssm_group_count(K_HEADS)
    w.add_ssm_time_step_rank(V_HEADS)
    w.add_ssm_inner_size(V_HEADS * STATE)
    w.add_recurrent_layers([t == "linear_attention" for t in LAYER_TYPES] + [False])
    w.add_full_attention_interval(4)
    w.add_rope_dimension_count(N_ROT)
    w.add_rope_dimension_sections([11, 11, 10, 0])
    if experts:
        w.add_expert_count(experts[0])
        w.add_expert_used_count(experts[1])
        w.add_expert_feed_forward_length(experts[2])
        w.add_expert_shared_feed_forward_length(experts[3])
    w.add_vocab_size(len(tokens))
    add_bpe_tokenizer(w, tokens, types, merges, "qwen35", ids["<|endoftext|>"], ids["<|im_end|>"], False)

    def gated_attention(p):  # attn_q yields [query | gate] per head
        w.add_tensor(p + "attn_q.weight", rand(2 * N_HEADS * HEAD, D_MODEL))
        w.add_tensor(p + "attn_k.weight", rand(N_KV_HEADS * HEAD, D_MODEL))
        w.add_tensor(p + "attn_v.weight", rand(N_KV_HEADS * HEAD, D_MODEL))
        w.add_tensor(p + "attn_output.weight", rand(D_MODEL, N_HEADS * HEAD))
        w.add_tensor(p + "attn_q_norm.weight", norm(HEAD))
        w.add_tensor(p + "attn_k_norm.weight", norm(HEAD))

    def feed_forward(p):
        w.add_tensor(p + "post_attention_norm.weight", norm(D_MODEL))
        if not experts:
            w.add_tensor(p + "ffn_gate.weight", rand(D_FF, D_MODEL))
            w.add_tensor(p + "ffn_up.weight", rand(D_FF, D_MODEL))
            w.add_tensor(p + "ffn_down.weight", rand(D_MODEL, D_FF))
            return
        n, _, ff, shared = experts
        w.add_tensor(p + "ffn_gate_inp.weight", rand(n, D_MODEL, scale=0.5))
        w.add_tensor(p + "ffn_gate_exps.weight", rand(n, ff, D_MODEL))
        w.add_tensor(p + "ffn_up_exps.weight", rand(n, ff, D_MODEL))
        w.add_tensor(p + "ffn_down_exps.weight", rand(n, D_MODEL, ff))
        w.add_tensor(p + "ffn_gate_inp_shexp.weight", rand(D_MODEL, scale=0.5))
        w.add_tensor(p + "ffn_gate_shexp.weight", rand(shared, D_MODEL))
        w.add_tensor(p + "ffn_up_shexp.weight", rand(shared, D_MODEL))
        w.add_tensor(p + "ffn_down_shexp.weight", rand(D_MODEL, shared))

    key_dim, value_dim = K_HEADS * STATE, V_HEADS * STATE
    conv_dim = 2 * key_dim + value_dim
    w.add_tensor("token_embd.weight", rand(len(tokens), D_MODEL, scale=0.5))
    for i, kind in enumerate(LAYER_TYPES):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(D_MODEL))
        if kind == "linear_attention":
            w.add_tensor(p + "attn_qkv.weight", rand(conv_dim, D_MODEL, scale=0.2))
            w.add_tensor(p + "attn_gate.weight", rand(value_dim, D_MODEL, scale=0.2))
            w.add_tensor(p + "ssm_conv1d.weight", rand(conv_dim, TAPS, scale=0.4))
            w.add_tensor(p + "ssm_dt.bias", rand(V_HEADS, scale=0.5))
            w.add_tensor(p + "ssm_a", -np.exp(rng.uniform(0.0, 1.5, V_HEADS)).astype(np.float32))
            w.add_tensor(p + "ssm_beta.weight", rand(V_HEADS, D_MODEL, scale=0.2))
            w.add_tensor(p + "ssm_alpha.weight", rand(V_HEADS, D_MODEL, scale=0.2))
            w.add_tensor(p + "ssm_norm.weight", norm(STATE))
            w.add_tensor(p + "ssm_out.weight", rand(D_MODEL, value_dim))
        else:
            gated_attention(p)
        feed_forward(p)
    p = f"blk.{len(LAYER_TYPES)}."  # the prediction block, as _QwenMtpMixin renames mtp.*
    w.add_tensor(p + "nextn.eh_proj.weight", rand(D_MODEL, 2 * D_MODEL))
    w.add_tensor(p + "nextn.enorm.weight", norm(D_MODEL))
    w.add_tensor(p + "nextn.hnorm.weight", norm(D_MODEL))
    w.add_tensor(p + "nextn.shared_head_norm.weight", norm(D_MODEL))
    w.add_tensor(p + "attn_norm.weight", norm(D_MODEL))
    gated_attention(p)
    feed_forward(p)
    w.add_tensor("output_norm.weight", norm(D_MODEL))
    w.add_tensor("output.weight", rand(len(tokens), D_MODEL, scale=0.2))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2])
